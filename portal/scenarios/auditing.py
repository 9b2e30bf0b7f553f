"""The audit line of a saved scenario, the same from the scenario page and the API."""

from __future__ import annotations

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.scenarios.models import Scenario


def scenario_saved(request, scenario: Scenario, previous_version: int | None, **extra) -> None:
    """``Scenario changed`` with what a reviewer needs (version before and after, budgets, callback,
    tolerance) and ``extra`` (who typed secrets, or ``via="api"``); never a secret's value."""
    audit.record(
        request,
        AuditEvent.Kind.SCENARIO_CHANGED,
        scenario=str(scenario.code),
        name=scenario.name,
        version=scenario.version,
        previous_version=previous_version,
        budgets=scenario.budgets,
        callback_url=scenario.callback_url,
        tolerance_pct=scenario.tolerance_pct,
        **extra,
        project_id=scenario.project_id,
    )
