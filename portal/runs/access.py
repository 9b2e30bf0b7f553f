"""Runs scoped to a requester, by the project rules (``portal.projects.access``): who sees a run and
who deletes it."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest

from portal.projects.access import can, visible_to
from portal.projects.models import Role
from portal.runs.models import Run


def runs_for(user) -> QuerySet[Run]:
    return visible_to(user, Run)


def get_run_for_user(request: HttpRequest, code, *, related=(), deferred=()) -> tuple[Run, str]:
    """The run and the user's role in its project. Outsiders get 404, never a hint it exists.
    ``related``/``deferred``: more relations to read in the same query, fields of them not to read.
    The role is read from the membership row the visibility filter joins (one per user and project),
    not by a subquery: one join, and half the query's cost on a page that is read all day."""
    try:
        run = (
            runs_for(request.user)
            .annotate(role=F("project__memberships__role"))
            .select_related("target", *related)
            .defer(*deferred)
            .get(code=code)
        )
    except (Run.DoesNotExist, ValidationError):
        raise Http404("No such run") from None
    return run, run.role


def may_delete_run(user, run: Run, role: str | None) -> bool:
    """Owners delete any run of their project; members the runs they started."""
    return can(role, Role.OWNER) or (can(role, Role.MEMBER) and run.owner_id == user.pk)
