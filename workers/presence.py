"""Workers say they are there: each Celery worker records itself (``WorkerSeen``) every few seconds,
and a worker asked to stop hands its runs back instead of holding its warm shutdown for a whole run.

- ``worker_ready`` (main process): a thread records the node name, host, pid and consumed queues
  every ``REPORT_S``; queued runs say why nobody took them from these rows (portal/runs/live.py).
- ``worker_shutting_down`` (main process; SIGTERM as ``docker stop`` and systemd send it): the rows
  say ``stopping`` and the open attempts this node executes get ``handback``; their executors' heartbeat
  stops the engine (the arm in progress is kept as partial) and puts the run back in the queue.
- SIGTERM reaching a pool process while it executes a run (sent by the stopping worker itself, or by
  systemd to the whole control group): the same, via ``STOP_REQUESTED``, at once, instead of the
  pool process dying mid-arm.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Iterator

import psutil
from celery.signals import worker_ready, worker_shutting_down
from django.db import connection
from django.utils import timezone

from portal.runs.models import Run, RunAttempt, WorkerSeen

log = logging.getLogger(__name__)

REPORT_S = 10.0
# Set in a pool process that received SIGTERM: its running run is handed back (workers.driver).
STOP_REQUESTED = threading.Event()
_stopped = threading.Event()


def report(name: str, queues: list[str], stopping: bool = False) -> None:
    WorkerSeen.objects.update_or_create(
        name=name,
        defaults={
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": queues,
            "last_seen": timezone.now(),
            "stopping": stopping,
        },
    )


def _loop(name: str, queues: list[str]) -> None:
    try:
        while not _stopped.is_set():
            try:
                report(name, queues)
            except Exception:  # noqa: BLE001 - the database may be away for a while; try again later
                log.warning("worker %s: could not record its presence", name, exc_info=True)
                connection.close()
            _stopped.wait(REPORT_S)
    finally:
        connection.close()


@worker_ready.connect
def _ready(sender, **_kwargs) -> None:
    name = sender.hostname
    queues = sorted(queue.name for queue in sender.task_consumer.queues)
    threading.Thread(target=_loop, args=(name, queues), daemon=True, name="tollgate-presence").start()


def hand_back_runs(name: str) -> int:
    """Ask the executors of the runs this worker node runs to hand them back."""
    WorkerSeen.objects.filter(name=name).update(stopping=True, last_seen=timezone.now())
    return RunAttempt.objects.filter(
        ended__isnull=True, run__status=Run.Status.RUNNING, worker__startswith=f"{name} pid "
    ).update(handback=True)


@worker_shutting_down.connect
def _shutting_down(sender, sig=None, how=None, **_kwargs) -> None:
    _stopped.set()
    # The pool processes hear it at once (their SIGTERM handler, below), the database a beat later.
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            child.send_signal(signal.SIGTERM)
    try:
        handed = hand_back_runs(str(sender))
        log.warning("worker %s: %s (%s); handing back %d run(s)", sender, how, sig, handed)
    except Exception:  # noqa: BLE001 - never block the shutdown; the reaper resumes what is left
        log.exception("worker %s: could not hand its runs back", sender)
    finally:
        connection.close()


def _on_sigterm(_signum, _frame) -> None:
    STOP_REQUESTED.set()


@contextlib.contextmanager
def stop_requests() -> Iterator[None]:
    """While a run executes in a pool process: SIGTERM asks for the run to be handed back instead
    of killing the process mid-arm (billiard's own handler, restored after, exits at once)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    STOP_REQUESTED.clear()
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
