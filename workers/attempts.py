"""Attempts of a run: who executes it, when an executor counts as lost, and how a run is resumed.

A claim (``workers.runner.claim``) starts a new attempt: ``Run.attempt`` goes up by one and only
that attempt's executor may beat, store arms or finish the run. When an executor is lost (killed,
stopped, its host gone) or hands the run back (asked to stop), the run goes back to ``queued`` with
its finished arms kept; the next claim measures only the missing arms (the engine skips the arm
and round pairs already stored) and the arm that was in progress is measured again. Each attempt
is recorded in ``Run.attempts`` so the report says which arms ran when and on which worker.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta

from amqp.exceptions import ChannelError
from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from portal.runs import dispatch
from portal.runs.models import ArmResult, Run
from workers.celery_app import app

log = logging.getLogger(__name__)


def executor_name(worker: str = "") -> str:
    """``celery@host pid 1234`` for a Celery worker (its node name), ``cli@host pid 1234`` otherwise."""
    return f"{worker or 'cli@' + socket.gethostname()} pid {os.getpid()}"


def executor_pid(worker: str) -> int | None:
    _, _, pid = worker.rpartition(" pid ")
    return int(pid) if pid.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def executor_lost(run: Run, host: str, now: datetime | None = None) -> bool:
    """Whether the executor of a running run is gone: its heartbeat has been silent for
    ``TOLLGATE_REAP_SILENCE_S``, or it ran on this host and its process no longer exists (a killed
    pool process whose task message came straight back)."""
    now = now or timezone.now()
    if run.heartbeat is None or (now - run.heartbeat).total_seconds() > settings.TOLLGATE_REAP_SILENCE_S:
        return True
    pid = executor_pid(run.worker)
    if run.generator_host != host or pid is None:
        return False
    return pid == os.getpid() or not _alive(pid)


def arm_keys(run: Run, complete: bool = True) -> list[str]:
    """``arm#round`` of the run's stored arms (finished ones by default): what a resumption skips."""
    rows = ArmResult.objects.filter(run=run, complete=complete).values_list("arm", "round")
    return sorted(f"{arm}#{round_}" for arm, round_ in rows)


def _stamp(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _entry(run: Run) -> dict:
    """The current attempt's history entry (appended at its claim)."""
    for entry in reversed(run.attempts):
        if entry.get("attempt") == run.attempt:
            return entry
    entry = {"attempt": run.attempt, "worker": run.worker, "host": run.generator_host}
    run.attempts.append(entry)
    return entry


def begin(run: Run) -> None:
    """Record the attempt just claimed (``run`` fresh from the database)."""
    entry = _entry(run)
    entry.update(started=_stamp(timezone.now()), arms=[], outcome="running")
    Run.objects.filter(pk=run.pk, attempt=run.attempt).update(attempts=run.attempts)


def close(run: Run, outcome: str, reason: str = "") -> None:
    """Write the attempt's end into ``run.attempts`` (the caller saves it with its status change)."""
    entry = _entry(run)
    mine = ArmResult.objects.filter(run=run, attempt=run.attempt, complete=True).order_by("position")
    entry.update(
        ended=_stamp(timezone.now()),
        outcome=outcome,
        reason=reason,
        arms=[f"{arm}#{round_}" for arm, round_ in mine.values_list("arm", "round")],
    )


def lost_reason(run: Run, how: str) -> str:
    """``worker celery@h pid 12 lost during arm tls_new at 14:02:11 UTC (no heartbeat for 31 s)``."""
    during = f" during arm {run.current_arm}" if run.current_arm else ""
    at = run.heartbeat.strftime("%H:%M:%S UTC") if run.heartbeat else "an unknown time"
    return f"worker {run.worker or 'unknown'} {how}{during} at {at}"


def clear_partial(run: Run) -> list[dict]:
    """Before a resumption measures again: the arms an earlier attempt cut short leave the stored
    results (the unique arm/round must be free) and stay in that attempt's history."""
    partial = []
    for arm in ArmResult.objects.filter(run=run, complete=False):
        partial.append(
            {
                "arm": arm.arm,
                "round": arm.round,
                "attempt": arm.attempt,
                "worker": arm.worker,
                "requests": arm.requests,
                "failures": arm.failures,
                "measured_s": arm.duration_s,
            }
        )
    if partial:
        for entry in run.attempts:
            entry.setdefault("partial", []).extend(p for p in partial if p["attempt"] == entry.get("attempt"))
        ArmResult.objects.filter(run=run, complete=False).delete()
        Run.objects.filter(pk=run.pk).update(attempts=run.attempts)
    return partial


def requeue(run: Run, outcome: str, reason: str) -> bool:
    """Put a running run back in the queue for another attempt (its finished arms kept), and send its
    task again. False when the run was not in that attempt any more (someone else acted first)."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().filter(
            pk=run.pk, status=Run.Status.RUNNING, attempt=run.attempt
        )
        current = locked.first()
        if current is None:
            return False
        close(current, outcome, reason)
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.QUEUED,
            requeued=timezone.now(),
            waiting=f"resuming: {reason}",
            handback=False,
            attempts=current.attempts,
        )
        dispatch.enqueue(current)
    log.warning("run %s requeued: %s", run.code, reason)
    return True


# A queued run not taken within this while its queue is empty lost its message (a broker that
# restarted without persistence): the reaper sends its task again.
LOST_MESSAGE_S = 60


def queue_length(queue: str) -> int | None:
    """Messages waiting in ``queue`` on the broker (None: the broker cannot tell)."""
    try:
        with app.connection_for_read() as conn:
            return conn.default_channel.queue_declare(queue, passive=True).message_count
    except ChannelError:  # 404: never declared, or emptied and dropped: nothing waits there
        return 0
    except Exception:  # noqa: BLE001 - the broker away or a transport without counts: do nothing
        log.warning("could not count the messages in queue %s", queue, exc_info=True)
        return None


def redispatch_lost(now: datetime) -> int:
    """Send the task again for queued runs (not held back by a full generator or project) whose
    message is gone: they waited over ``LOST_MESSAGE_S`` and the runs queue is empty. A duplicate
    is harmless (a claim is a compare-and-set), and none is sent while messages wait."""
    stale = Run.objects.filter(
        status=Run.Status.QUEUED, waiting="", created__lt=now - timedelta(seconds=LOST_MESSAGE_S)
    ).filter(models.Q(requeued__isnull=True) | models.Q(requeued__lt=now - timedelta(seconds=LOST_MESSAGE_S)))
    runs = list(stale)
    if not runs or queue_length(dispatch.RUNS_QUEUE) != 0:
        return 0
    for run in runs:
        log.warning(
            "run %s: queued for over %d s with an empty queue; its task is sent again",
            run.code,
            LOST_MESSAGE_S,
        )
        dispatch.enqueue(run)
    return len(runs)
