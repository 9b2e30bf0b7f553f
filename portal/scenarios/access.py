"""Scenarios scoped to a requester, by the project rules (``portal.projects.access``)."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest

from portal.projects.access import get_for_user, visible_to
from portal.scenarios.models import Scenario


def scenarios_for(user) -> QuerySet[Scenario]:
    return visible_to(user, Scenario)


def get_scenario_for_user(request: HttpRequest, code) -> tuple[Scenario, str]:
    return get_for_user(request, Scenario, code)
