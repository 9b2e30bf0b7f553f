"""The published report-signing keys: public, no login, cacheable."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from portal.signing.services import published

# Keys change only on rotation and a retired key stays listed, so a cached copy verifies every report
# it lists; short enough that a report signed by a freshly rotated key soon verifies everywhere.
KEYS_MAX_AGE_S = 300


@require_safe
@cache_control(public=True, max_age=KEYS_MAX_AGE_S)
def report_keys(request: HttpRequest) -> JsonResponse:
    response = JsonResponse({"keys": published()}, json_dumps_params={"indent": 2})
    # Public data: a verifier running in a browser elsewhere may read it.
    response["Access-Control-Allow-Origin"] = "*"
    return response
