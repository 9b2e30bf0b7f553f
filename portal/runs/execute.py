"""Drive one run: claim it, start the engine subprocess, store arms as they arrive, finish.

Shared by the Celery task (``workers.tasks.run_benchmark``) and the CLI (``manage.py tollgate run``).
The engine runs in its own process group: Locust's gevent patching never touches this process,
and a timeout or cancel reaches every child.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from portal.runs.configs import engine_dict
from portal.runs.models import ArmResult, Run
from portal.vault import SecretError
from workers.engine.protocol import EngineConfig

log = logging.getLogger(__name__)

HEARTBEAT_S = 2.0
# Time for the engine to start (import Locust), preflight each arm and stop each swarm.
STARTUP_ALLOWANCE_S = 30.0
PER_ARM_ALLOWANCE_S = 15.0
PROGRESS_TTL_S = 3600


def probing_key(run: Run) -> str:
    return f"run-probing:{run.code}"


def progress_key(run: Run) -> str:
    return f"run-progress:{run.code}"


def time_limit_s(config: EngineConfig) -> float:
    return config.planned_s() + STARTUP_ALLOWANCE_S + PER_ARM_ALLOWANCE_S * len(config.arms) * config.rounds


def _aware(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


def claim(run_id: int) -> bool:
    """Atomically move a queued run to running; False if someone else has it (redelivery)."""
    now = timezone.now()
    return (
        Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.RUNNING, started=now, heartbeat=now
        )
        == 1
    )


def execute_run(run_id: int) -> Run | None:
    """Run a queued run to a terminal state. Returns None when the run was not ours to take."""
    if not claim(run_id):
        log.info("run %s is not queued any more; skipping", run_id)
        return None
    run = Run.objects.get(pk=run_id)
    try:
        _drive(run)
    except BaseException as exc:
        # Never leave a run "running" behind: record why, then let the error propagate.
        _finish(run, Run.Status.FAILED, f"internal error: {type(exc).__name__}: {exc}")
        raise
    run.refresh_from_db()
    return run


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
        errors=result["errors"],
        connections_opened=result["connections_opened"],
        tls_sessions_reused=result["tls_sessions_reused"],
        window_started=result.get("window_started_at"),
        window_ended=result.get("window_ended_at"),
        late_requests=result.get("late_requests", 0),
        max_schedule_lag_us=result.get("max_schedule_lag_us", 0),
        series=result["series"],
        started=_aware(result["started_at"]),
        finished=_aware(result["finished_at"]),
    )


def _finish(run: Run, status: str, error: str = "") -> None:
    Run.objects.filter(pk=run.pk).update(status=status, error=error, finished=timezone.now())
    cache.delete(progress_key(run))
    cache.delete(probing_key(run))
    from portal.runs.reporting import summarize

    run.refresh_from_db()
    try:
        if run.arms.exists():
            # Computes the report once and stores it (the run is final now): readers find it ready.
            Run.objects.filter(pk=run.pk).update(summary=summarize(run))
    except Exception:  # a convenience; the run's own record is already final
        log.exception("run %s: could not summarize or store its report", run.code)


def _engine_command() -> list[str]:
    return [sys.executable, "-m", "workers.engine"]


def _drive(run: Run) -> None:
    try:
        config = EngineConfig.from_dict(engine_dict(run.config, with_secrets=True))
    except SecretError as exc:
        _finish(run, Run.Status.FAILED, f"{exc}: re-enter the credentials (were the keys rotated?).")
        return
    limit_s = time_limit_s(config)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")]))
    from portal.runs import probing

    # Server-side probes connect and start sampling before the load; they never fail the run.
    probes = probing.started(run)
    try:
        status, error = _run_engine(run, config, limit_s, env)
    finally:
        # Before the run is final: its summary and cached report include what the probes found.
        if probes is not None:
            cache.set(probing_key(run), probes.finishing_note(), PROGRESS_TTL_S)
            try:
                probes.finish()
            except Exception:
                log.exception("run %s: probes could not finish", run.code)
    _finish(run, status, error)


def _run_engine(run: Run, config: EngineConfig, limit_s: float, env: dict) -> tuple[str, str]:
    """Run the engine to its end; the run's terminal (status, error)."""
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            _engine_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=settings.BASE_DIR,
            env=env,
            start_new_session=True,
        )
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            _signal_group(proc, signal.SIGKILL)

        watchdog = threading.Timer(limit_s, kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            proc.stdin.write(config.to_json())
            proc.stdin.close()
            outcome = _read_messages(run, proc)
            returncode = proc.wait()
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        stderr.seek(0)
        stderr_tail = stderr.read()[-2000:]

    arms_kept = ArmResult.objects.filter(run=run).count()
    kept = f" Kept {arms_kept} finished arm(s)." if arms_kept else ""
    if timed_out.is_set():
        return Run.Status.FAILED, f"Timed out after {limit_s:.0f} s; the engine was stopped.{kept}"
    if outcome["arm_error"]:
        return Run.Status.FAILED, f"Arm {outcome['arm_error_arm']}: {outcome['arm_error']}.{kept}"
    if outcome["done"] == "cancelled":
        return Run.Status.CANCELLED, f"Cancelled by the user.{kept}"
    if outcome["done"] == "succeeded" and returncode == 0:
        return Run.Status.SUCCEEDED, ""
    return (
        Run.Status.FAILED,
        f"The engine exited with code {returncode} before finishing.{kept}\n{stderr_tail}".strip(),
    )


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _read_messages(run: Run, proc: subprocess.Popen) -> dict:
    outcome: dict = {"done": None, "arm_error": None, "arm_error_arm": None}
    arms_done: list[str] = []
    last_beat = 0.0
    cancel_sent = False
    for line in proc.stdout:
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            log.warning("run %s: engine printed a non-protocol line: %r", run.code, line[:200])
            continue
        kind = message.get("type")
        if kind == "hello":
            Run.objects.filter(pk=run.pk).update(engine=message["engine"])
        elif kind == "tls_info":
            Run.objects.filter(pk=run.pk).update(tls_info=message["info"] | {"url": message.get("url")})
        elif kind == "arm":
            store_arm(run, len(arms_done), message)
            arms_done.append(message["arm"])
        elif kind == "arm_error":
            outcome["arm_error"] = message["error"]
            outcome["arm_error_arm"] = message["arm"]
        elif kind == "done":
            outcome["done"] = message["status"]
        elif kind == "progress":
            message["arms_done"] = arms_done
            message["updated"] = time.time()
            cache.set(progress_key(run), message, PROGRESS_TTL_S)
        now = time.monotonic()
        if now - last_beat >= HEARTBEAT_S:
            last_beat = now
            Run.objects.filter(pk=run.pk).update(heartbeat=timezone.now())
            if not cancel_sent and Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
                # The engine ends the current arm early and still reports what it measured.
                cancel_sent = True
                _signal_group(proc, signal.SIGTERM)
    return outcome


def reap_stale_runs(max_silence_s: float = 120.0) -> int:
    """Fail runs whose worker stopped sending heartbeats (crashed host, killed worker)."""
    cutoff = timezone.now() - timezone.timedelta(seconds=max_silence_s)
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat__lt=cutoff)
    return stale.update(
        status=Run.Status.FAILED,
        finished=timezone.now(),
        error=f"The worker stopped reporting for more than {max_silence_s:.0f} s (crashed or killed); "
        "finished arms are kept.",
    )
