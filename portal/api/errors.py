"""One error shape for the whole API: ``{"status": <code>, "errors": {field: [messages]}, "detail":
"…"}``, whatever raised it (DRF, Django's 404/403, a refused run)."""

from __future__ import annotations

import logging

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

log = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the object's state."
    default_code = "conflict"

    def __init__(self, detail: str, *, run_status: str | None = None) -> None:
        super().__init__(detail)
        self.run_status = run_status


class Refused(exceptions.ValidationError):
    """A 400 with field messages (``portal.runs.starting.RunRefused`` and friends)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__(errors)


def _text(value) -> str:
    """A message as the JSON renderer can encode it: a lone surrogate the request brought in (an
    unknown key named ``"\\ud800"`` in the body, echoed back) is shown escaped, not a 500."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def _messages(value) -> list[str]:
    if isinstance(value, list):
        return [_text(item) for item in value]
    if isinstance(value, dict):  # a nested serializer's errors: flatten them under the parent field
        return [f"{_text(key)}: {msg}" for key, inner in value.items() for msg in _messages(inner)]
    return [_text(value)]


def body(status_code: int, detail: str, errors: dict | None = None) -> dict:
    return {"status": status_code, "errors": errors or {}, "detail": detail}


def handle(exc, context):
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: DRF's own handler (headers such as WWW-Authenticate and
    Retry-After), then the body reshaped."""
    response = exception_handler(exc, context)
    if response is None:
        # A real bug: logged with its traceback, answered in the API's shape (clients never parse
        # HTML), never with the traceback in the body.
        log.error("API error in %s", context.get("view"), exc_info=(type(exc), exc, exc.__traceback__))
        return Response(body(500, "Internal error: it is logged; try again or tell the operator."), 500)
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        if isinstance(data, dict):
            errors = {_text(key): _messages(value) for key, value in data.items()}
        else:
            errors = {"non_field_errors": _messages(data)}
        detail = "Invalid input: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
        response.data = body(response.status_code, detail, errors)
    else:
        detail = data.get("detail", "") if isinstance(data, dict) else str(data)
        response.data = body(response.status_code, _text(detail))
        if getattr(exc, "run_status", None):
            response.data["run_status"] = exc.run_status
    return response


@csrf_exempt  # nothing to protect, and a POST to a wrong path must be a 404 too, not a CSRF page
def not_found(request, *args, **kwargs) -> JsonResponse:
    """Any other path under /api/v1/ (or a malformed id): JSON too, so clients never parse HTML."""
    return JsonResponse(body(404, "No such endpoint."), status=404)
