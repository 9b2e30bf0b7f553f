"""The project switcher's data on every page: the user's memberships and the current project."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from portal.projects import switcher
from portal.projects.access import SESSION_KEY


def projects(request: HttpRequest) -> dict:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}

    def memberships() -> list[switcher.SwitcherRow]:
        # The memberships with their projects, from the cache (portal/projects/switcher.py): no query
        # once read, until one of them changes.
        return switcher.rows_marked(user, request.session.get(SESSION_KEY))

    return {"project_memberships": SimpleLazyObject(memberships)}
