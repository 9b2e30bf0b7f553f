"""Ctrl-C of ``manage.py tollgate run``: cancel the run as the web button does, at once.

The run executes in this process (``workers.runner.execute_when_free``), its engine in a session of
its own, so a terminal's Ctrl-C reaches only this process (and its local CPU sampler, which ignores
it: ``workers.probes.ssh.CpuSampler.local``). A queued run is cancelled on the spot; a running one is
asked to stop (``Run.cancel_requested``) and its engine gets SIGTERM now rather than at the executor's
next heartbeat (every 2 s, ``workers.driver``): it ends the current arm, which is kept as partial,
and the run ends cancelled with its finished arms.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from django.db import connection
from django.utils import timezone

from portal.runs.models import Run

ENGINE_COMMAND = [b"-m", b"workers.engine"]


def own_engines() -> list[int]:
    """The engine subprocesses of this process (``python -m workers.engine``), from Linux's /proc;
    [] elsewhere."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                for pid in Path(f"/proc/self/task/{task}/children").read_text().split():
                    with contextlib.suppress(OSError):
                        if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:3] == ENGINE_COMMAND:
                            found.append(int(pid))
    return found


class CancelOnCtrlC:
    """While the run executes (a context manager): SIGINT cancels it. The signal handler may have
    interrupted this thread inside a query, so the database is written from a thread of its own."""

    def __init__(self, run: Run, say: Callable[[str], object]) -> None:
        self.run = run
        self.say = say
        self.previous = None

    def __enter__(self) -> CancelOnCtrlC:
        self.previous = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _interrupt(self, signum, frame) -> None:
        threading.Thread(target=self.cancel, daemon=True, name="ctrl-c").start()

    def cancel(self) -> None:
        run = self.run
        try:
            if Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
                status=Run.Status.CANCELLED, finished=timezone.now(), error="Cancelled before it started."
            ):
                self.say(f"run {run.code}: cancelled before it started")
            elif Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True):
                self.say(f"run {run.code}: cancelling (Ctrl-C); the current arm stops and is kept")
                for pid in own_engines():  # each is its own process group (start_new_session)
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGTERM)
        finally:
            connection.close()  # this thread's own connection
