"""The Regressions section of the scenario page: ``{% judgement_section scenario %}`` — the judged
runs against the pinned baseline as a chart (``static/js/judgements.js``) and a table, regressions
marked, and the last regression's cost change and what changed. A tag, so the scenario app renders
it without importing this one."""

from __future__ import annotations

from django import template

from portal.judgements import services
from portal.judgements.models import Judgement
from portal.lib.watching import judgements as judgelib

register = template.Library()


@register.inclusion_tag("judgements/_section.html")
def judgement_section(scenario) -> dict:
    points = services.series(scenario)
    last = (
        Judgement.objects.filter(scenario=scenario, status__in=["regression", "improvement"])
        .select_related("run", "baseline")
        .first()
    )
    moved = (
        [c for c in last.result["costs"] if c["judgement"] in ("regression", "improvement")] if last else []
    )
    return {
        "scenario": scenario,
        "points": points,
        "rows": list(reversed(points)),
        "last": last,
        "last_costs": [judgelib.describe_cost(c) for c in moved],
        "last_changes": [judgelib.describe_change(c) for c in last.result["changes"]] if last else [],
    }
