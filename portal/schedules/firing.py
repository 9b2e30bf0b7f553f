"""One tick of a schedule (``workers.tasks.fire_schedule``): start the scenario's run as any other
start does (``portal.runs.starting.start_run``: validated, quotas counted, queued), or log why not.

Skipped when a run of the scenario is still queued or running (the previous firing's, or one a
person, the API or a webhook started): two runs of one scenario at once would measure each other.
Refused, with the reason, when a quota or the scenario's options refuse the run or when the
schedule's owner may no longer start runs in the project. Every outcome is a ``Firing`` row (the
scenario page shows them) and a log line. The Celery task id makes a redelivered tick a no-op.
"""

from __future__ import annotations

import logging
from uuid import uuid4

from django.db import transaction
from django.utils import timezone

from portal.runs import starting
from portal.runs.models import Run
from portal.schedules import services
from portal.schedules.models import Firing, Schedule

log = logging.getLogger(__name__)
SOURCE = "schedule"  # Run.source of the runs it starts (the report's run.source)
Outcome = Firing.Outcome


def fire(schedule_id: int, task_id: str = "") -> Firing | None:
    """Fire schedule ``schedule_id`` once; None when it no longer exists, is disabled, or this task
    id fired already."""
    task_id = task_id or f"direct-{uuid4()}"
    with transaction.atomic():
        schedule = (
            Schedule.objects.select_for_update()
            .select_related("scenario__project", "created_by")
            .filter(pk=schedule_id)
            .first()
        )
        if schedule is None or not schedule.enabled or Firing.objects.filter(task_id=task_id).exists():
            return None
        firing = Firing(schedule=schedule, task_id=task_id, at=timezone.now())
        firing.outcome, firing.reason, firing.run = _decide(schedule)
        firing.save()
    log.info(
        "schedule of scenario %s (%s): %s %s",
        schedule.scenario.code,
        schedule.cron,
        firing.outcome,
        firing.reason or (firing.run.code if firing.run else ""),
    )
    return firing


def _decide(schedule: Schedule) -> tuple[str, str, Run | None]:
    scenario = schedule.scenario
    busy = (
        Run.objects.filter(scenario=scenario, status__in=(Run.Status.QUEUED, Run.Status.RUNNING))
        .order_by("-created", "-pk")
        .first()
    )
    if busy is not None:
        return (
            Outcome.SKIPPED,
            f"the previous run {busy.code} (started by {busy.source}) is still {busy.status}",
            None,
        )
    why = services.refusal(scenario, schedule.created_by)
    if why:
        return Outcome.REFUSED, f"{why}; a member saves the schedule again", None
    user = schedule.created_by
    try:
        run = starting.start_run(user, scenario.project, {}, scenario=scenario, source=SOURCE)
    except starting.RunRefused as exc:
        said = [
            " ".join(msgs) if key == "non_field_errors" else f"{key}: {' '.join(msgs)}"
            for key, msgs in exc.errors.items()
        ]
        return Outcome.REFUSED, "; ".join(said), None
    return Outcome.STARTED, "", run
