"""Who may see what: the one place that scopes runs and targets to a user.

A later issue replaces ``owner`` with project membership; views only call these helpers.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404, HttpRequest

from portal.runs.models import Run
from portal.targets.models import Scenario, Target


def runs_for(user) -> QuerySet[Run]:
    return Run.objects.filter(owner=user)


def targets_for(user) -> QuerySet[Target]:
    return Target.objects.filter(owner=user)


def scenarios_for(user) -> QuerySet[Scenario]:
    return Scenario.objects.filter(owner=user)


def get_run_for_user(request: HttpRequest, code) -> tuple[Run, bool]:
    """The run and whether the user may change it. Outsiders get 404, never a hint it exists."""
    try:
        run = runs_for(request.user).select_related("target").get(code=code)
    except Run.DoesNotExist:
        raise Http404("No such run") from None
    return run, True
