"""Response headers Django has no setting for: Permissions-Policy (settings.TOLLGATE_PERMISSIONS_POLICY)."""

from __future__ import annotations

from django.conf import settings


class PermissionsPolicyMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        response.headers.setdefault("Permissions-Policy", settings.TOLLGATE_PERMISSIONS_POLICY)
        return response
