"""The published report-signing keys and the verifier that reads them: public, no login, cacheable."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from portal.lib.security import signing
from portal.signing.services import published

# Keys change only on rotation and a retired key stays listed, so a cached copy verifies every report
# it lists; short enough that a report signed by a freshly rotated key soon verifies everywhere.
KEYS_MAX_AGE_S = 300
KEYS_FILENAME = "tollgate-report-keys.json"
# The verifier an auditor downloads is portal/lib/security/signing.py itself, byte for byte (it imports only
# the standard library and ``cryptography``): one source, served, never a copy kept elsewhere.
VERIFIER_FILENAME = "tollgate-verify-report.py"


@require_safe
@cache_control(public=True, max_age=KEYS_MAX_AGE_S)
def report_keys(request: HttpRequest) -> JsonResponse:
    response = JsonResponse({"keys": published()}, json_dumps_params={"indent": 2})
    # Public data: a verifier running in a browser elsewhere may read it.
    response["Access-Control-Allow-Origin"] = "*"
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{KEYS_FILENAME}"'
    return response


@cache
def _verifier_source() -> bytes:
    return Path(signing.__file__).read_bytes()


@require_safe
@cache_control(public=True, max_age=KEYS_MAX_AGE_S)
def verifier(request: HttpRequest) -> HttpResponse:
    """The offline verifier (``python tollgate-verify-report.py REPORT.json --keys KEYS.json``), as
    text to read in the browser, or as a file with ``?download=1``."""
    response = HttpResponse(_verifier_source(), content_type="text/plain; charset=utf-8")
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="{VERIFIER_FILENAME}"'
    return response
