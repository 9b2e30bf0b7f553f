"""The portal's processes for a drill, on the drill's private Redis and PostgreSQL: Celery workers,
the maintenance worker and beat, Gunicorn. Each is a named ``Service`` in its own process group with
its own log; the drill kills, stops, continues or restarts one by name, and ``Stack.close`` ends
them all (and whatever they started) however the drill ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
from celery import Celery

from portal.console.demo_target import gunicorn_command
from portal.runs import dispatch
from tests.conftest import ROOT
from tests.drills.services import free_port, kill_group, port_open, tail

# Like tests/conftest.py's celery_worker: no gossip, mingle or broker heartbeat between workers.
QUIET_WORKER = ("--without-gossip", "--without-mingle", "--without-heartbeat")


class Service:
    """One named process (and its children) started by ``start``; ``restart`` starts the same
    command again (Gunicorn on the same port)."""

    def __init__(self, name: str, cmd: list[str], env: dict, log: Path, port: int | None = None) -> None:
        self.name, self.cmd, self.env, self.log, self.port = name, cmd, env, log, port
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> Service:
        with open(self.log, "ab") as out:
            out.write(f"\n===== {self.name}: start {self.starts + 1} at {time.strftime('%T')}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.cmd, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tree(self) -> list[psutil.Process]:
        """The process and all its descendants now (the engine has a process group of its own)."""
        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def signal(self, sig: int) -> None:
        """``sig`` to the whole process group (the main process and its pool or worker children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9 of the group, as a crash; waits until it is gone."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def terminate(self, wait_s: float | None = None) -> int | None:
        """SIGTERM to the main process only (what systemd or Docker send first); with ``wait_s``,
        waits that long for it to exit and returns its exit code (None: still running)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGTERM)
        if wait_s is None:
            return None
        try:
            return self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def restart(self) -> Service:
        """kill -9 (if still running), then start the same command again."""
        if self.alive:
            self.kill()
        return self.start()

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM to the group, SIGKILL after ``grace_s``, then SIGKILL to anything it left."""
        if self.proc is None:
            return
        leftovers = self.tree()
        kill_group(self.proc, grace_s=grace_s)
        for proc in leftovers:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()

    def log_tail(self, chars: int = 3000) -> str:
        return tail(self.log, chars)


def _celery(*args: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", "workers.celery_app", *args, "-l", "info"]


class Stack:
    """The processes of one drill. ``env`` is what every child gets: the private database and
    Redis (broker and cache), the demo settings of the test run (TOLLGATE_DEMO, the loopback
    allow-list) and this portal's base URL."""

    def __init__(self, workdir: Path, database_url: str, redis_url: str) -> None:
        self.dir = workdir
        self.web_port = free_port()
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTEST_XDIST_WORKER")}
        self.env = env | {
            "DATABASE_URL": database_url,
            "CELERY_BROKER_URL": redis_url,
            "PYTHONPATH": str(ROOT),
            "TOLLGATE_BASE_URL": self.base_url,
        }
        self.services: dict[str, Service] = {}
        self.redis_url = redis_url
        # Celery prefers the CELERY_BROKER_URL of the environment (the shared Redis of the tests) to
        # any broker given here: ``dispatch`` passes its own connection instead.
        self.broker = Celery("tollgate-drill", set_as_current=False)
        self.broker.conf.update(task_serializer="json", accept_content=["json"], task_ignore_result=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def __getitem__(self, name: str) -> Service:
        return self.services[name]

    def add(self, name: str, cmd: list[str], env: dict | None = None, port: int | None = None) -> Service:
        assert name not in self.services, f"{name} already runs"
        service = Service(name, cmd, self.env | (env or {}), self.dir / f"{name}.log", port)
        self.services[name] = service
        return service.start()

    def worker(self, name: str = "worker", queues: str = "runs", env: dict | None = None) -> Service:
        """A Celery worker on ``queues``, concurrency 1 (as the demo's run worker)."""
        cmd = _celery("worker", "-Q", queues, "--concurrency", "1", "-n", f"{name}@%h", *QUIET_WORKER)
        return self.add(name, cmd, env)

    def maintenance(self) -> tuple[Service, Service]:
        """The maintenance worker (reaper, callbacks) and beat, as in portal/console/demo.py."""
        worker = self.worker("maintenance", "maintenance,celery")
        beat = self.add("beat", _celery("beat", "--schedule", str(self.dir / "celerybeat-schedule")))
        return worker, beat

    def portal(self, timeout_s: float = 30) -> Service:
        """Gunicorn (gthread, 1 worker × 4 threads) on ``web_port``; returns once Django answers."""
        cmd = gunicorn_command("portal.wsgi:application", f"127.0.0.1:{self.web_port}", "--workers", "1")
        # No control socket: Gunicorn's default ($HOME/.gunicorn/gunicorn.ctl) is one per machine.
        web = self.add("web", [*cmd, "--threads", "4", "--no-control-socket"], port=self.web_port)
        self.wait_for_web(timeout_s)
        return web

    def restart_web(self, timeout_s: float = 30) -> float:
        """kill -9 Gunicorn and start it again on the same port; seconds until Django answered."""
        began = time.monotonic()
        self["web"].restart()
        self.wait_for_web(timeout_s)
        return time.monotonic() - began

    def wait_for_web(self, timeout_s: float = 30) -> None:
        """Until a Gunicorn worker has loaded Django and answers (the master listens before)."""
        web, deadline = self["web"], time.monotonic() + timeout_s
        while True:
            if port_open(self.web_port):
                try:
                    urllib.request.urlopen(self.base_url + "/accounts/login/", timeout=5)  # noqa: S310
                    return
                except (urllib.error.URLError, OSError):
                    pass
            if not web.alive or time.monotonic() > deadline:
                raise AssertionError(f"Gunicorn does not answer on {self.web_port}:\n{web.log_tail()}")
            time.sleep(0.1)

    def dispatch(self, run) -> None:
        """Send ``run`` (a queued Run) to the runs queue of the private broker, as
        portal.runs.dispatch.enqueue does (same task name, queue and time limits)."""
        soft, hard = dispatch.task_limits(run)
        with self.broker.connection_for_write(self.redis_url) as connection:
            self.broker.send_task(
                dispatch.RUN_TASK,
                args=[run.pk],
                queue=dispatch.RUNS_QUEUE,
                soft_time_limit=soft,
                time_limit=hard,
                connection=connection,
            )

    def check_alive(self, *names: str) -> None:
        for name in names or list(self.services):
            service = self.services[name]
            assert service.alive, f"{name} exited with {service.proc.returncode}:\n{service.log_tail()}"

    def logs(self, chars: int = 3000) -> str:
        return "\n".join(f"----- {name} ({s.log})\n{s.log_tail(chars)}" for name, s in self.services.items())

    def close(self) -> None:
        """Every service and everything it started, however the drill ended."""
        for service in self.services.values():
            service.stop()
