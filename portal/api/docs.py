"""The browsable API docs: Swagger UI from npm (static/vendor/swagger-ui), started by a static script
(static/js/api_docs.js) that reads the schema from /api/v1/schema; no validator, nothing leaves the
portal."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


@require_GET
def api_docs(request: HttpRequest) -> HttpResponse:
    """Public like the schema: it describes the API, it shows no data (calls need a token)."""
    return render(request, "api/docs.html")
