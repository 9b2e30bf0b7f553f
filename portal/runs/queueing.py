"""Why a queued run has not started: what the run page (and its progress JSON) says about it.

A queued run either says why a worker holds it back (``Run.waiting``: a full generator or project, a
resumption) or, once it has waited a little, what the workers are doing: none consuming the runs
queue has reported lately (``WorkerSeen``, written by workers/presence.py), or they are all busy.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from portal.runs.models import Run, WorkerSeen

RUNS_QUEUE = "runs"
# A fresh run is normally taken within a second or two; after this the page explains the wait.
QUIET_S = 10


def _ago(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def _consumers() -> list[WorkerSeen]:
    """Workers that consume the runs queue, as they last reported, latest first."""
    return [w for w in WorkerSeen.objects.order_by("-last_seen") if RUNS_QUEUE in w.queues]


def _present(consumers: list[WorkerSeen], now: datetime) -> list[WorkerSeen]:
    fresh = now - timedelta(seconds=settings.TOLLGATE_WORKER_SEEN_S)
    return [w for w in consumers if w.last_seen >= fresh and not w.stopping]


def runs_workers_present(now: datetime | None = None) -> bool:
    """Whether a worker consuming the runs queue reported in the last ``TOLLGATE_WORKER_SEEN_S`` and
    is not stopping: someone would take a run put back in the queue."""
    return bool(_present(_consumers(), now or timezone.now()))


def queue_note(run: Run, now: datetime | None = None) -> str | None:
    """``None`` for a run that is not queued, else what it is waiting for, in words."""
    if run.status != Run.Status.QUEUED:
        return None
    now = now or timezone.now()
    # Since it was put back in the queue (its last attempt's end), or created.
    since = run.attempts.aggregate(requeued=Max("ended"))["requeued"] or run.created
    waited = (now - since).total_seconds()
    if run.waiting and not run.waiting.startswith("resuming:"):
        return run.waiting
    prefix = f"{run.waiting[:1].upper()}{run.waiting[1:]}. " if run.waiting else ""
    if waited < QUIET_S:
        return f"{prefix}Waiting for a worker…"
    consumers = _consumers()
    present = _present(consumers, now)
    queued_for = f"Queued for {_ago(since, now)}"
    if not present:
        last = (
            f"the last one, {consumers[0].name}, {_ago(consumers[0].last_seen, now)} ago"
            if consumers
            else "none ever has"
        )
        return (
            f"{prefix}{queued_for} and no worker has taken it: no worker consuming the {RUNS_QUEUE} queue "
            f"has "
            f"reported in the last {settings.TOLLGATE_WORKER_SEEN_S} s ({last}). It starts when one does."
        )
    busy = Run.objects.filter(status=Run.Status.RUNNING).count()
    return (
        f"{prefix}{queued_for}: {len(present)} worker(s) consuming the {RUNS_QUEUE} queue are present "
        f"and {busy} run(s) are running; it starts when one is free."
    )
