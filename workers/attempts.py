"""Attempts of a run: who executes it, when an executor counts as lost, and how a run is resumed.

A claim (``workers.runner.claim``) opens a new attempt, a ``RunAttempt`` row, and only that attempt's
executor may beat, store arms or finish the run: each of these is a compare-and-set on its row still
being open (``ended`` null), and an attempt is only ever closed under its run's row lock, together
with the run's status change. When an executor is lost (killed, stopped, its host gone) or hands the
run back (asked to stop), its attempt is closed and the run goes back to ``queued`` with its finished
arms kept; the next claim measures only the missing arms (the engine skips the arm and round pairs
already stored) and the arm that was in progress is measured again. The rows are the report's
``run.attempts``: which arms ran when and on which worker.
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
from portal.runs.models import ArmResult, Run, RunAttempt
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


def current(run: Run) -> RunAttempt | None:
    """The run's open attempt (one while it runs), or None."""
    return run.attempts.filter(ended__isnull=True).first()  # its .run is ``run``


def last(run: Run) -> RunAttempt | None:
    """The run's latest attempt, open or ended (a queued run's: why it was put back)."""
    return run.attempts.order_by("-number").first()


def executor_lost(attempt: RunAttempt | None, host: str, now: datetime | None = None) -> bool:
    """Whether the executor of a running run's open ``attempt`` is gone (None: it has none): its
    heartbeat has been silent for ``TOLLGATE_REAP_SILENCE_S``, or it ran on this host and its process
    no longer exists (a killed pool process whose task message came straight back)."""
    now = now or timezone.now()
    if attempt is None or (now - attempt.heartbeat).total_seconds() > settings.TOLLGATE_REAP_SILENCE_S:
        return True
    pid = executor_pid(attempt.worker)
    if attempt.host != host or pid is None:
        return False
    return pid == os.getpid() or not _alive(pid)


def arm_keys(run: Run, complete: bool = True) -> list[str]:
    """``arm#round`` of the run's stored arms (finished ones by default): what a resumption skips."""
    rows = ArmResult.objects.filter(run=run, complete=complete).values_list("arm", "round")
    return sorted(f"{arm}#{round_}" for arm, round_ in rows)


def begin(run: Run, worker: str, host: str, now: datetime, limit_s: float) -> RunAttempt:
    """Open the next attempt of ``run``, just claimed under its row lock (the unique run and number
    pair refuses a second one). It must end within ``limit_s`` (its ``deadline``)."""
    number = (RunAttempt.objects.filter(run=run).aggregate(last=models.Max("number"))["last"] or 0) + 1
    return RunAttempt.objects.create(
        run=run,
        number=number,
        worker=worker,
        host=host,
        claimed=now,
        heartbeat=now,
        deadline=now + timedelta(seconds=limit_s),
    )


def close(attempt: RunAttempt, outcome: str, reason: str = "") -> bool:
    """End the attempt with its outcome, reason and the arms it stored finished; False (and nothing
    written) when it had ended already. Callers hold its run's row lock and change the run's status
    in the same transaction."""
    mine = ArmResult.objects.filter(run_id=attempt.run_id, attempt=attempt.number, complete=True)
    arms = [f"{arm}#{round_}" for arm, round_ in mine.order_by("position").values_list("arm", "round")]
    return bool(
        RunAttempt.objects.filter(pk=attempt.pk, ended__isnull=True).update(
            ended=timezone.now(), outcome=outcome, reason=reason, arms=arms
        )
    )


def lost_reason(attempt: RunAttempt | None, how: str) -> str:
    """``worker celery@h pid 12 lost during arm tls_new at 14:02:11 UTC (no heartbeat for 31 s)``."""
    if attempt is None:
        return f"worker unknown {how} at an unknown time"
    during = f" during arm {attempt.current_arm}" if attempt.current_arm else ""
    at = attempt.heartbeat.strftime("%H:%M:%S UTC")
    return f"worker {attempt.worker or 'unknown'} {how}{during} at {at}"


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
        with transaction.atomic():
            for attempt in RunAttempt.objects.select_for_update().filter(
                run=run, number__in={p["attempt"] for p in partial}
            ):
                attempt.partial += [p for p in partial if p["attempt"] == attempt.number]
                attempt.save(update_fields=["partial"])
            ArmResult.objects.filter(run=run, complete=False).delete()
    return partial


def open_of_running():
    """The open attempts of running runs, with their runs."""
    return RunAttempt.objects.filter(ended__isnull=True, run__status=Run.Status.RUNNING).select_related("run")


def stale(open_attempts, silence_s: float, now):
    """The open attempts (of the queryset) whose executor counts as lost: its heartbeat silent for
    ``silence_s``, or past its deadline."""
    silent = models.Q(heartbeat__lt=now - timedelta(seconds=silence_s))
    return open_attempts.filter(silent | models.Q(deadline__lt=now))


def requeue(attempt: RunAttempt, outcome: str, reason: str) -> bool:
    """Put a running run back in the queue for another attempt (its finished arms kept), and send its
    task again. False when ``attempt`` had ended already (someone else acted first)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=attempt.run_id, status=Run.Status.RUNNING).first()
        if run is None or not close(attempt, outcome, reason):
            return False
        Run.objects.filter(pk=run.pk).update(status=Run.Status.QUEUED, waiting=f"resuming: {reason}")
        dispatch.enqueue(run)
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
    cutoff = now - timedelta(seconds=LOST_MESSAGE_S)
    stale = (
        Run.objects.filter(status=Run.Status.QUEUED, waiting="", created__lt=cutoff)
        .annotate(requeued=models.Max("attempts__ended"))
        .filter(models.Q(requeued__isnull=True) | models.Q(requeued__lt=cutoff))
    )
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
