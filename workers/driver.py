"""The engine subprocess of one run, and the heartbeat that watches over the run while it lives.

The engine runs in its own process group (Locust's gevent patching never touches this process, and
a timeout, cancel or reap reaches every child). The heartbeat is a timer thread of the executor, not
a side effect of engine output, so a slow preflight, SSH connect or ``openssl speed`` never looks
dead to the reaper.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from portal.lib.runs.protocol import EngineConfig
from portal.runs.live import PROGRESS_TTL_S, cache_set, progress_key, with_point
from portal.runs.models import ArmResult, Run, RunAttempt
from workers import generators, presence, storage
from workers.arms import kept_arms, store_arm
from workers.celery_app import app

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
STOP_POLL_S = 0.2
_PR_SET_PDEATHSIG = 1
try:  # resolved here, not in the forked child, where loading a library could deadlock
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: an orphaned engine still ends with its arms
    _prctl = None


class Heartbeat:
    """Touches its attempt's ``heartbeat`` (and ``current_arm``) every HEARTBEAT_S while the attempt
    is open, forwards a cancel request to the engine, asks the engine to stop when the worker is
    asked to stop (``RunAttempt.handback`` or SIGTERM in this process: the run is handed back), and
    stops the engine at once when the attempt has ended (reaped, resumed elsewhere)."""

    def __init__(self, run: Run, attempt: RunAttempt, interval_s: float = HEARTBEAT_S) -> None:
        self.run = run
        self.attempt = attempt
        self.interval_s = interval_s
        self.on_cancel: Callable[[], None] | None = None
        self.on_handback: Callable[[], None] | None = None
        self.on_lost: Callable[[], None] | None = None
        self.current_arm: Callable[[], str] = str
        self.lost = False
        self.handing_back = False
        self._stop = threading.Event()
        self._cancel_sent = False
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"heartbeat-{run.pk}")

    def __enter__(self) -> Heartbeat:
        if connection.in_atomic_block:
            # The caller holds the run's row in an open transaction (a test's atomic block): another
            # connection could neither see nor update it, so there is nothing to beat with.
            log.warning("run %s: executed inside a transaction; no heartbeat", self.run.code)
            return self
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        next_beat = time.monotonic() + self.interval_s
        try:
            # A SIGTERM in this process (workers.presence) is acted on within STOP_POLL_S.
            while not self._stop.wait(STOP_POLL_S):
                if presence.STOP_REQUESTED.is_set():
                    self._hand_back()
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + self.interval_s
                    self.beat()
        finally:
            connection.close()  # this thread's own database connection

    def beat(self) -> None:
        try:
            close_old_connections()
            mine = RunAttempt.objects.filter(pk=self.attempt.pk, ended__isnull=True)
            alive = mine.update(heartbeat=timezone.now(), current_arm=self.current_arm()[:80])
            if not alive:
                self._lose()
                return
            handback, cancel = mine.values_list("handback", "run__cancel_requested").first() or (False, False)
            if handback:
                self._hand_back()
            elif cancel and not self._cancel_sent:
                # The engine ends the current arm early and still reports what it measured.
                self._cancel_sent = True
                if self.on_cancel is not None:
                    self.on_cancel()
        except storage.UNAVAILABLE as exc:  # a missed beat is retried; the reaper allows for several
            log.warning("run %s: heartbeat missed, database unavailable (%s)", self.run.code, exc)
            storage.reset()
        except Exception:
            log.exception("run %s: heartbeat failed", self.run.code)

    def _hand_back(self) -> None:
        if self.handing_back or self._cancel_sent:
            return
        log.warning("run %s: the worker is asked to stop; handing the run back", self.run.code)
        self.handing_back = True
        if self.on_handback is not None:
            self.on_handback()

    def _lose(self) -> None:
        if not self.lost:
            log.warning(
                "run %s is no longer this attempt's (reaped, resumed?); stopping its engine", self.run.code
            )
        self.lost = True
        if self.on_lost is not None:
            self.on_lost()


def distribution_fields(invited: list[str]) -> dict:
    """A distributed engine's (``generators`` != 1) ``EngineConfig`` fields from the operator's
    settings: where its Locust master binds, how long it waits for its workers, the cap on ``auto``,
    which other generator hosts were invited (it waits for each to join before the first arm)."""
    return {
        "master_bind": settings.TOLLGATE_MASTER_BIND,
        "master_port": settings.TOLLGATE_MASTER_PORT,
        "generator_connect_s": float(settings.TOLLGATE_GENERATOR_CONNECT_S),
        "max_generators": settings.TOLLGATE_MAX_GENERATORS,
        "remote_hosts": [queue.removeprefix(generators.PREFIX) for queue in invited],
    }


def _die_with_parent() -> None:
    """In the engine child: be killed when the executor dies (a ``kill -9`` of the worker must not
    leave an orphaned swarm hammering the target)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class EngineProcess:
    """``python -m workers.engine`` fed one config; its JSON lines turned into stored arms."""

    def __init__(self, run: Run, config: EngineConfig, limit_s: float, attempt: RunAttempt) -> None:
        self.run = run
        self.attempt = attempt  # whose executor stores the arms (workers.arms.store_arm)
        self.config = config
        self.limit_s = limit_s
        self.on_arm: Callable[[ArmResult], None] | None = None
        self.variants: list[dict] = []  # the TLS matrix's probed variants so far (Run.variants)
        self.refused: list[dict] = []  # arms refused in the preflight so far (Run.refused_arms)
        self.capacity: dict = {}  # the saturation search's stages so far (Run.capacity)
        self.timed_out = threading.Event()
        self.stopped_by: str | None = None
        self.cancelled = False  # a cancel (or a hand-back) was sent
        self.proc: subprocess.Popen | None = None
        self.outcome: dict = {"done": None, "arm_error": None, "arm_error_arm": None, "preflight": False}
        self.stderr_tail = ""
        self.returncode: int | None = None
        self.live: dict | None = None  # the last progress message, with its arm's seconds so far
        self.invited: list[str] = []  # other generator hosts' queues (distributed runs)
        # Arms reported while the database was unreachable, stored in order once it answers again.
        self.pending: list[dict] = []
        self._retry_at = 0.0

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def cancel(self) -> None:
        self.cancelled = True
        self.signal(signal.SIGTERM)

    def kill(self, reason: str) -> None:
        self.stopped_by = self.stopped_by or reason
        self.signal(signal.SIGKILL)

    def run_to_end(self) -> EngineProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")]))
        if self.config.generators != 1:
            self.invited = generators.discover(app)
        for name, value in distribution_fields(self.invited).items():
            setattr(self.config, name, value)
        with tempfile.TemporaryFile("w+") as stderr:
            self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "workers.engine"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                cwd=settings.BASE_DIR,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent,  # only a prctl: safe beside the heartbeat thread
            )
            watchdog = threading.Timer(self.limit_s, self._time_out)
            watchdog.daemon = True
            watchdog.start()
            try:
                self.proc.stdin.write(self.config.to_json())
                self.proc.stdin.close()
                self._read_messages()
                self.returncode = self.proc.wait()
            finally:
                watchdog.cancel()
                if self.proc.poll() is None:
                    self.signal(signal.SIGKILL)
                    self.proc.wait()
            stderr.seek(0)
            self.stderr_tail = stderr.read()[-2000:]
        return self

    def _time_out(self) -> None:
        self.timed_out.set()
        self.kill("timeout")

    def current_arm(self) -> str:
        """The arm being measured now (``tls_new (measure)``, ``plain (warmup)``), for the heartbeat."""
        live = self.live or {}
        return f"{live['arm']} ({live.get('phase', '')})" if live.get("arm") else ""

    def _store(self, message: dict | None) -> None:
        """Store ``message``'s arm after any pending ones; while the database is unreachable keep them
        (the engine is never held up: its pipe keeps flowing) and try again a second later."""
        if message is not None:
            self.pending.append(message)
        if not self.pending or time.monotonic() < self._retry_at:
            return
        try:
            while self.pending:
                arm = store_arm(self.attempt, self.pending[0])
                self.pending.pop(0)
                if arm is not None and self.on_arm is not None:
                    self.on_arm(arm)
        except storage.UNAVAILABLE as exc:
            log.warning(
                "run %s: %d arm(s) kept until the database answers (%s)",
                self.run.code,
                len(self.pending),
                exc,
            )
            storage.reset()
            self._retry_at = time.monotonic() + 1.0

    def flush(self, limit_s: float) -> None:
        """After the engine: store what is still pending, waiting up to ``limit_s`` for the database."""
        if self.pending:
            self._retry_at = 0.0
            storage.retrying(self._flush_once, f"storing the arms of run {self.run.code}", limit_s)

    def _flush_once(self) -> None:
        self._retry_at = 0.0
        self._store(None)
        if self.pending:
            raise storage.UNAVAILABLE[0]("the database is still unavailable")

    def _read_messages(self) -> None:
        # A resumption's progress counts the arms an earlier attempt finished.
        arms_done: list[str] = [key.partition("#")[0] for key in self.config.skip]
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                log.warning("run %s: engine printed a non-protocol line: %r", self.run.code, line[:200])
                continue
            try:
                self._handle(message, arms_done)
                self._store(None)  # arms kept during an outage, once a second
            except storage.UNAVAILABLE as exc:  # facts, matrix, capacity: the next update carries them
                log.warning(
                    "run %s: %s message not stored, database unavailable (%s)",
                    self.run.code,
                    message.get("type"),
                    exc,
                )
                storage.reset()

    def _handle(self, message: dict, arms_done: list[str]) -> None:
        kind = message.get("type")
        run = self.run
        if kind == "hello":
            Run.objects.filter(pk=run.pk).update(engine=message["engine"])
        elif kind == "server_software":  # the Server headers of the preflights' answers
            software = {key: message.get(key) for key in ("tls", "plain")}
            Run.objects.filter(pk=run.pk).update(server_software=software)
        elif kind == "tls_info":
            Run.objects.filter(pk=run.pk).update(tls_info=message["info"] | {"url": message.get("url")})
        elif kind == "matrix":
            # One message per repeated arm (tls_new, h2_new; tls, h2 for the protocol): they add up.
            self.variants += message["variants"]
            Run.objects.filter(pk=run.pk).update(variants=self.variants)
        elif kind == "refused":  # an arm the server cannot serve (HTTP/2 not offered): not measured
            self.refused.append({key: message.get(key) for key in ("arm", "url", "reason")})
            Run.objects.filter(pk=run.pk).update(refused_arms=self.refused)
        elif kind == "capacity":  # one stage of the saturation search (workers/engine/saturation.py)
            self.capacity = self.capacity or {"settings": self.config.saturation, "arms": {}}
            self.capacity["arms"].setdefault(message["arm"], []).append(message["point"])
            Run.objects.filter(pk=run.pk).update(capacity=self.capacity)
        elif kind == "arm":
            arms_done.append(message["arm"])
            self._store(message)
        elif kind == "generator" and message.get("event") == "master":
            self.invite(message)
        elif kind == "arm_error":
            self.outcome["arm_error"] = message["error"]
            self.outcome["arm_error_arm"] = message["arm"]
            self.outcome["preflight"] = bool(message.get("preflight"))
        elif kind == "done":
            self.outcome["done"] = message["status"]
        elif kind == "progress":
            message["arms_done"] = arms_done
            message["updated"] = time.time()
            self.live = with_point(message, self.live)
            cache_set(progress_key(run.code), self.live, PROGRESS_TTL_S)  # best-effort

    def invite(self, master: dict) -> None:
        """Ask the invited generator hosts to start Locust workers that join this run's master."""
        for queue in self.invited:
            app.send_task(
                "workers.tasks.join_run",
                args=[
                    self.run.pk,
                    generators.advertised(master["host"]),
                    master["port"],
                    self.config.generators,
                ],
                kwargs={"limit_s": self.limit_s},
                queue=queue,
            )
        if self.invited:
            log.info("run %s: invited generator hosts %s", self.run.code, ", ".join(self.invited))

    def stopped_in_preflight(self) -> bool:
        """Whether the engine stopped the run in its preflight of every arm, before any load, and no
        arm of it was measured (by an earlier attempt either): it does not count against quotas."""
        return (
            not self.timed_out.is_set()
            and self.outcome["preflight"]
            and not ArmResult.objects.filter(run=self.run).exists()
        )

    def verdict(self) -> tuple[str, str]:
        """The run's terminal (status, error) from how the engine ended."""
        kept = kept_arms(self.run)
        if self.timed_out.is_set():
            return Run.Status.FAILED, f"Timed out after {self.limit_s:.0f} s; the engine was stopped.{kept}"
        if self.outcome["arm_error"]:
            after = kept
            if self.stopped_in_preflight():
                after = " Nothing was measured: every arm's URL is checked before the first arm is measured."
            arm, error = self.outcome["arm_error_arm"], self.outcome["arm_error"]
            return Run.Status.FAILED, f"Arm {arm}: {error}.{after}"
        # An engine still starting when the cancel came may die of it before it can say "done".
        if self.outcome["done"] == "cancelled" or (self.cancelled and self.returncode == -signal.SIGTERM):
            return Run.Status.CANCELLED, f"Cancelled by the user.{kept}"
        if self.outcome["done"] == "succeeded" and self.returncode == 0:
            return Run.Status.SUCCEEDED, ""
        exited = f"The engine exited with code {self.returncode} before finishing.{kept}"
        return Run.Status.FAILED, f"{exited}\n{self.stderr_tail}".strip()
