"""Queries the scenario pages and the CLI share."""

from __future__ import annotations

from django.db.models import OuterRef, Subquery

from portal.runs.models import Run


def last_runs(scenario_ids: list[int]) -> dict[int, Run]:
    """The newest run of each scenario, in one query (a correlated subquery: SQLite, the demo's
    database, has no DISTINCT ON)."""
    newest = (
        Run.objects.filter(scenario_id=OuterRef("scenario_id")).order_by("-created", "-pk").values("pk")[:1]
    )
    runs = Run.objects.filter(scenario_id__in=scenario_ids, pk=Subquery(newest.values("pk")[:1])).only(
        "code", "status", "created", "summary", "scenario_id", "scenario_version"
    )
    return {run.scenario_id: run for run in runs}
