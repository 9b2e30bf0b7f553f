"""After a run of a scenario ends: judge it against its target's pinned baseline
(``portal.judgements``), then alert the project's channels of a regression or improvement
(``portal.alerts``), each channel its own task with its own retries. The maintenance worker does it:
run workers are busy for a whole run."""

from __future__ import annotations

import logging

from django.db import transaction

from portal.alerts import services as alerts
from portal.judgements import services as judgements
from portal.runs.models import Run
from workers.celery_app import app

log = logging.getLogger(__name__)
JUDGE_TASK = "workers.tasks.judge_run"
ALERT_TASK = "workers.tasks.deliver_alert"
QUEUE = "maintenance"


def schedule(run: Run) -> bool:
    """Enqueue the judgement of a run of a scenario that succeeded, when its target has a baseline
    (another run), once its end is committed."""
    judged = (
        Run.objects.filter(
            pk=run.pk, status=Run.Status.SUCCEEDED, scenario__isnull=False, target__baseline__isnull=False
        )
        .exclude(target__baseline=run.pk)
        .exists()
    )
    if not judged:
        return False
    transaction.on_commit(lambda: _send(JUDGE_TASK, [run.pk]))
    return True


def _send(task: str, args: list) -> None:
    try:
        app.send_task(task, args=args, queue=QUEUE)
    except Exception:  # the run's own record is final already; a lost judgement is logged, not fatal
        log.exception("could not enqueue %s%s", task, args)


def judge(run_id: int) -> str | None:
    """Judge the run and enqueue one alert delivery per channel that takes it. Returns the status."""
    judgement = judgements.judge_run(run_id)
    if judgement is None:
        return None
    alert = alerts.compose(judgement)
    if alert is not None:
        for channel in alerts.channels_for(judgement):
            _send(ALERT_TASK, [alert.pk, channel.pk])
    return judgement.status
