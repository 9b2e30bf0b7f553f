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
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.db import close_old_connections, connection
from django.utils import timezone

from portal.lib.protocol import EngineConfig
from portal.runs.live import PROGRESS_TTL_S, progress_key, with_point
from portal.runs.models import ArmResult, Run
from workers import generators
from workers.celery_app import app

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
_PR_SET_PDEATHSIG = 1
try:  # resolved here, not in the forked child, where loading a library could deadlock
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux: an orphaned engine still ends with its arms
    _prctl = None


def _aware(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


class Heartbeat:
    """Touches ``Run.heartbeat`` every HEARTBEAT_S while the run is ours, forwards a cancel request
    to the engine, and stops the engine at once when the run was ended by someone else (reaped)."""

    def __init__(self, run: Run, interval_s: float = HEARTBEAT_S) -> None:
        self.run = run
        self.interval_s = interval_s
        self.on_cancel: Callable[[], None] | None = None
        self.on_lost: Callable[[], None] | None = None
        self.lost = False
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
        try:
            while not self._stop.wait(self.interval_s):
                self.beat()
        finally:
            connection.close()  # this thread's own database connection

    def beat(self) -> None:
        try:
            close_old_connections()
            alive = Run.objects.filter(pk=self.run.pk, status=Run.Status.RUNNING).update(
                heartbeat=timezone.now()
            )
            if not alive:
                self._lose()
            elif not self._cancel_sent and Run.objects.filter(pk=self.run.pk, cancel_requested=True).exists():
                # The engine ends the current arm early and still reports what it measured.
                self._cancel_sent = True
                if self.on_cancel is not None:
                    self.on_cancel()
        except Exception:  # a missed beat is retried; the reaper allows for several
            log.exception("run %s: heartbeat failed", self.run.code)

    def _lose(self) -> None:
        if not self.lost:
            log.warning("run %s is no longer running here (reaped?); stopping its engine", self.run.code)
        self.lost = True
        if self.on_lost is not None:
            self.on_lost()


def store_arm(run: Run, position: int, message: dict) -> ArmResult:
    result = message["result"]
    hist = result["hist"]
    return ArmResult.objects.create(
        run=run,
        arm=message["arm"],
        round=message.get("round", 0),
        position=position,
        url=message["url"],
        requested_url=message.get("requested_url", message["url"]),
        targets=message.get("targets", []),
        redirects=message.get("redirects", []),
        complete=result["complete"],
        stopped=(result.get("stopped") or "")[:300],
        users=result["users"],
        warmup_s=result["warmup_s"],
        warmup_requests=result["warmup_requests"],
        duration_s=result["measured_s"],
        requests=result["requests"],
        failures=result["failures"],
        rps=result["rps"],
        ttfb_hist=hist["ttfb_us"] or "",
        ttlb_hist=hist["ttlb_us"] or "",
        connect_hist=hist["connect_us"] or "",
        tls_handshake_hist=hist["tls_handshake_us"] or "",
        status_codes=result["status_codes"],
        response_bytes_min=result["response_bytes"]["min"],
        response_bytes_max=result["response_bytes"]["max"],
        sizes_by_url=result["sizes_by_url"],
        content_by_url=result.get("content_by_url", {}),
        errors=result["errors"],
        connections_opened=result["connections_opened"],
        tls_sessions_reused=result["tls_sessions_reused"],
        window_started=result.get("window_started_at"),
        window_ended=result.get("window_ended_at"),
        late_requests=result.get("late_requests", 0),
        max_schedule_lag_us=result.get("max_schedule_lag_us", 0),
        series=result["series"],
        generators=result.get("generators", []),
        started=_aware(result["started_at"]),
        finished=_aware(result["finished_at"]),
    )


def kept_arms(run: Run) -> str:
    """`` Kept 2 finished arm(s) and 1 arm(s) cut short (tls_new).``: an arm a cancel cut short is
    never called finished."""
    rows = list(ArmResult.objects.filter(run=run).order_by("position").values_list("arm", "complete"))
    finished = sum(1 for _, complete in rows if complete)
    short = [arm for arm, complete in rows if not complete]
    parts = [f"{finished} finished arm(s)"] if finished else []
    if short:
        parts.append(f"{len(short)} arm(s) cut short ({', '.join(short)})")
    return f" Kept {' and '.join(parts)}." if parts else ""


def generator_env(config: EngineConfig, invited: list[str]) -> dict[str, str]:
    """What a distributed engine (``generators`` != 1) reads from its environment: where its Locust
    master binds, how long it waits for its workers, the cap on ``auto``, which other generator
    hosts were invited (it waits for each to join before the first arm)."""
    return {
        "TOLLGATE_MASTER_BIND": settings.TOLLGATE_MASTER_BIND,
        "TOLLGATE_MASTER_PORT": str(settings.TOLLGATE_MASTER_PORT),
        "TOLLGATE_GENERATOR_CONNECT_S": str(settings.TOLLGATE_GENERATOR_CONNECT_S),
        "TOLLGATE_MAX_GENERATORS": str(settings.TOLLGATE_MAX_GENERATORS),
        "TOLLGATE_REMOTE_HOSTS": ",".join(queue.removeprefix(generators.PREFIX) for queue in invited),
    }


def _die_with_parent() -> None:
    """In the engine child: be killed when the executor dies (a ``kill -9`` of the worker must not
    leave an orphaned swarm hammering the target)."""
    if _prctl is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class EngineProcess:
    """``python -m workers.engine`` fed one config; its JSON lines turned into stored arms."""

    def __init__(self, run: Run, config: EngineConfig, limit_s: float) -> None:
        self.run = run
        self.config = config
        self.limit_s = limit_s
        self.on_arm: Callable[[ArmResult], None] | None = None
        self.variants: list[dict] = []  # the TLS matrix's probed variants so far (Run.variants)
        self.capacity: dict = {}  # the saturation search's stages so far (Run.capacity)
        self.timed_out = threading.Event()
        self.stopped_by: str | None = None
        self.proc: subprocess.Popen | None = None
        self.outcome: dict = {"done": None, "arm_error": None, "arm_error_arm": None}
        self.stderr_tail = ""
        self.returncode: int | None = None
        self.live: dict | None = None  # the last progress message, with its arm's seconds so far
        self.invited: list[str] = []  # other generator hosts' queues (distributed runs)

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def cancel(self) -> None:
        self.signal(signal.SIGTERM)

    def kill(self, reason: str) -> None:
        self.stopped_by = self.stopped_by or reason
        self.signal(signal.SIGKILL)

    def run_to_end(self) -> EngineProcess:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")]))
        if self.config.generators != 1:
            self.invited = generators.discover(app)
        env.update(generator_env(self.config, self.invited))
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

    def _read_messages(self) -> None:
        arms_done: list[str] = []
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                log.warning("run %s: engine printed a non-protocol line: %r", self.run.code, line[:200])
                continue
            self._handle(message, arms_done)

    def _handle(self, message: dict, arms_done: list[str]) -> None:
        kind = message.get("type")
        run = self.run
        if kind == "hello":
            Run.objects.filter(pk=run.pk).update(engine=message["engine"])
        elif kind == "tls_info":
            Run.objects.filter(pk=run.pk).update(tls_info=message["info"] | {"url": message.get("url")})
        elif kind == "matrix":
            # One message per repeated arm (tls_new, and tls for the protocol): they add up.
            self.variants += message["variants"]
            Run.objects.filter(pk=run.pk).update(variants=self.variants)
        elif kind == "capacity":  # one stage of the saturation search (workers/engine/saturation.py)
            self.capacity = self.capacity or {"settings": self.config.saturation, "arms": {}}
            self.capacity["arms"].setdefault(message["arm"], []).append(message["point"])
            Run.objects.filter(pk=run.pk).update(capacity=self.capacity)
        elif kind == "arm":
            arm = store_arm(run, len(arms_done), message)
            arms_done.append(message["arm"])
            if self.on_arm is not None:
                self.on_arm(arm)
        elif kind == "generator" and message.get("event") == "master":
            self.invite(message)
        elif kind == "arm_error":
            self.outcome["arm_error"] = message["error"]
            self.outcome["arm_error_arm"] = message["arm"]
        elif kind == "done":
            self.outcome["done"] = message["status"]
        elif kind == "progress":
            message["arms_done"] = arms_done
            message["updated"] = time.time()
            self.live = with_point(message, self.live)
            cache.set(progress_key(run.code), self.live, PROGRESS_TTL_S)

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

    def verdict(self) -> tuple[str, str]:
        """The run's terminal (status, error) from how the engine ended."""
        kept = kept_arms(self.run)
        if self.timed_out.is_set():
            return Run.Status.FAILED, f"Timed out after {self.limit_s:.0f} s; the engine was stopped.{kept}"
        if self.outcome["arm_error"]:
            return (
                Run.Status.FAILED,
                f"Arm {self.outcome['arm_error_arm']}: {self.outcome['arm_error']}.{kept}",
            )
        if self.outcome["done"] == "cancelled":
            return Run.Status.CANCELLED, f"Cancelled by the user.{kept}"
        if self.outcome["done"] == "succeeded" and self.returncode == 0:
            return Run.Status.SUCCEEDED, ""
        exited = f"The engine exited with code {self.returncode} before finishing.{kept}"
        return Run.Status.FAILED, f"{exited}\n{self.stderr_tail}".strip()
