"""Error pages that cannot fail themselves.

Django's own ``bad_request`` view is wrapped in ``requires_csrf_token``, which reads ``request.POST``
again. When the 400 came from reading ``request.POST`` (a form declared ``charset=latin-1``: Django
reads urlencoded forms as UTF-8 only), that raises once more, and so does the 500 page after it:
the user got a server error. This view reads nothing of the request body.

The API and the webhooks answer JSON, their 400s too — one whose Host header Django refused
(``DisallowedHost``) never reaches their views: it gets the API's error shape here (docs/api.md).
"""

from __future__ import annotations

import logging

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string

log = logging.getLogger(__name__)
JSON_PREFIXES = ("/api/", "/hooks/")


def explain(request: HttpRequest, exception: Exception | None) -> str:
    """One line a user can act on; Django's words only for a plain BadRequest (not a security one)."""
    encoding = (getattr(request, "encoding", None) or "utf-8").lower()
    if request.content_type == "application/x-www-form-urlencoded" and encoding not in ("utf-8", "utf8"):
        return (
            f"The form was sent as charset={encoding}; Tollgate reads forms as UTF-8 only (browsers send "
            "its forms so). Send it again as UTF-8."
        )
    if isinstance(exception, BadRequest) and not isinstance(exception, SuspiciousOperation):
        return str(exception)
    return "The request could not be understood."


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    message = explain(request, exception)
    if request.path.startswith(JSON_PREFIXES):
        return JsonResponse({"status": 400, "errors": {}, "detail": message}, status=400)
    try:
        body = render_to_string("400.html", {"message": message}, request=request)
    except Exception:  # noqa: BLE001 - an error page must not fail; fall back to plain text
        log.exception("the 400 page could not be rendered")
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
    return HttpResponseBadRequest(body)
