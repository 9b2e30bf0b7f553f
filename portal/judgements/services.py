"""Judging a run that has ended against its target's pinned baseline, and the series the scenario
page shows. The rule is ``portal.lib.watching.judgements``; this reads the two frozen reports and stores the
verdict. Runs the maintenance worker's ``workers.tasks.judge_run`` once a run of a scenario has ended.
"""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction

from portal.judgements.models import Judgement
from portal.lib.watching import judgements as judgelib
from portal.runs import reporting
from portal.runs.models import Run

log = logging.getLogger(__name__)
SERIES_RUNS = 100


def judge_run(run_id: int) -> Judgement | None:
    """Judge run ``run_id`` (once: a second call returns the stored judgement). None when there is
    nothing to judge: no scenario, no succeeded run, no baseline, or the run is the baseline."""
    run = Run.objects.select_related("scenario", "target__baseline").filter(pk=run_id).first()
    if run is None or run.scenario_id is None or run.status != Run.Status.SUCCEEDED:
        return None
    done = Judgement.objects.filter(run=run).first()
    if done is not None:
        return done
    baseline = run.target.baseline
    if baseline is None or baseline.pk == run.pk:
        return None
    result = judgelib.judge(
        reporting.export_report(run), reporting.export_report(baseline), run.scenario.tolerance_pct
    )
    try:
        with transaction.atomic():
            judgement = Judgement.objects.create(
                run=run,
                scenario=run.scenario,
                baseline=baseline,
                status=result["status"],
                tolerance_pct=run.scenario.tolerance_pct,
                result=result,
            )
    except IntegrityError:  # judged meanwhile by a redelivered task
        return Judgement.objects.get(run=run)
    log.info("run %s against baseline %s: %s", run.code, baseline.code, judgement.status)
    return judgement


def series(scenario, limit: int = SERIES_RUNS) -> list[dict]:
    """The scenario's judged runs, oldest first, for its chart and table: ``{"run", "t", "label", "status",
    "costs": {name: {"delta", "ci95", "judgement", "baseline_delta", "baseline_ci95"}}}``."""
    rows = (
        Judgement.objects.filter(scenario=scenario)
        .select_related("run")
        .only("status", "result", "created", "run__code", "run__created")[:limit]
    )
    out = []
    for judgement in reversed(rows):
        costs = {
            c["name"]: {
                "delta": c["run"]["delta"],
                "ci95": c["run"]["ci95"],
                "judgement": c["judgement"],
                "baseline_delta": c["baseline"]["delta"],
                "baseline_ci95": c["baseline"]["ci95"],
            }
            for c in judgement.result.get("costs", [])
        }
        out.append(
            {
                "run": str(judgement.run.code),
                "t": judgement.run.created.isoformat(),
                "label": f"{judgement.run.created:%Y-%m-%d %H:%M}",
                "status": judgement.status,
                "costs": costs,
            }
        )
    return out
