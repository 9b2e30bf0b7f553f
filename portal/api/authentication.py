"""Bearer-token authentication and scope checks of the JSON API.

Only ``Authorization: Bearer <token>`` is accepted: no session, so no CSRF to think about, and a
browser's cookies never act on the API. Each request acts as the token's user within the token's
project only, and only while the user is still a member there: ``request.auth`` is the token, with
``role`` (the user's current role in the project) set on it.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from portal.api import tokens
from portal.api.models import ApiToken
from portal.projects.access import can, role_in
from portal.projects.models import Role

SCHEME = "Bearer"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != SCHEME.lower().encode():
            return None  # no credentials: NotAuthenticated (401) from the permission check
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: Bearer <token>.")
        try:
            presented = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.") from None
        token = tokens.find(presented)
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown or revoked token.")
        role = role_in(token.user, token.project_id)
        if role is None:
            raise exceptions.AuthenticationFailed("The token's user is no longer a member of its project.")
        token.role = role
        tokens.touch(token)
        return token.user, token

    def authenticate_header(self, request) -> str:
        # Makes DRF answer 401 (not 403) without or with bad credentials.
        return f'{SCHEME} realm="api"'


class TokenScope(permissions.BasePermission):
    """Reading needs a token (either scope) and a role in its project (viewer or above); anything
    else needs a ``run`` token and the member role."""

    message = "This needs a token of scope run and the member role in the token's project."

    def has_permission(self, request, view) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            raise exceptions.NotAuthenticated("Send Authorization: Bearer <token>.")
        if request.method in permissions.SAFE_METHODS:
            return can(token.role, Role.VIEWER)
        if token.scope != ApiToken.Scope.RUN:
            self.message = "This token's scope is read: it may only GET."
            return False
        if not can(token.role, Role.MEMBER):
            self.message = "This needs the member role in the token's project."
            return False
        return True


class BearerScheme(OpenApiAuthenticationExtension):
    """The bearer security scheme in the OpenAPI schema (drf-spectacular finds it by the class)."""

    target_class = BearerTokenAuthentication
    name = "bearerAuth"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API token (tg_…) from the portal's Tokens page or `tollgate token create`.",
        }
