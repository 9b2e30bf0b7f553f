"""Targets scoped to a requester, by the project rules (``portal.projects.access``)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest

from portal.projects.access import get_for_user, visible_to
from portal.targets.models import Target


def targets_for(user) -> QuerySet[Target]:
    return visible_to(user, Target)


def get_target_for_user(request: HttpRequest, code) -> tuple[Target, str]:
    return get_for_user(request, Target, code)
