"""Processes of the portal load bench (``bench/portal_load``): a private Redis, the portal on
Gunicorn, and the CPU each of them (and PostgreSQL's backends, and Locust) spends over time.

Everything listens on 127.0.0.1 on a free port, runs in its own session and is stopped by the
bench (``stop``), whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import redis

from bench.nginx import free_port

ROOT = Path(__file__).resolve().parent.parent
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
START_TIMEOUT_S = 60.0


def proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a live process (all its threads); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def child_pids(pid: int) -> list[int]:
    children: list[int] = []
    with contextlib.suppress(OSError, ValueError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            children.extend(int(p) for p in (task / "children").read_text().split())
    return sorted(set(children))


def machine_busy_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / TICKS_PER_S, sum(values[:8]) / TICKS_PER_S


def start(cmd: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True
        )


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def tail(path: Path, chars: int = 2500) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def start_redis(workdir: Path) -> tuple[subprocess.Popen, str]:
    """A private redis-server (no persistence) on a free loopback port: the portal's cache and broker
    for the bench, so no other process's queue or rate-limit counters mix in."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server not found (apt-get install redis-server)")
    port = free_port()
    cmd = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    proc = start([*cmd, "--dir", str(workdir)], workdir / "redis.log", dict(os.environ))
    deadline = time.monotonic() + START_TIMEOUT_S
    client = redis.Redis(host="127.0.0.1", port=port)
    while True:
        try:
            client.ping()
            return proc, f"redis://127.0.0.1:{port}/0"
        except redis.ConnectionError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop(proc)
                raise RuntimeError(f"redis-server did not start: {tail(workdir / 'redis.log')}") from None
            time.sleep(0.05)


def gunicorn_command(port: int, workers: int, threads: int) -> list[str]:
    # gthread with keep-alive, like the demo (portal/console/demo.py) and the Dockerfile.
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "portal.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--worker-class",
        "gthread",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--no-control-socket",
        "--keep-alive",
        "30",
    ]


def start_portal(workdir: Path, env: dict, workers: int, threads: int) -> tuple[subprocess.Popen, str]:
    """The portal on Gunicorn; returns once every worker has answered (the login page, 200)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = workdir / "gunicorn.log"
    # Links made outside a request (share links of webhook runs) point at this portal.
    proc = start(gunicorn_command(port, workers, threads), log, {**env, "TOLLGATE_BASE_URL": base})
    deadline = time.monotonic() + START_TIMEOUT_S
    while len(child_pids(proc.pid)) < workers or not _answers(base + "/accounts/login/"):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"Gunicorn did not start: {tail(log)}")
        time.sleep(0.1)
    return proc, base


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


class CpuSampler:
    """Every ``interval_s``: the CPU seconds so far of each named group of processes (given as
    functions returning pids), and of the whole machine. ``between(t0, t1)`` gives each group's CPU
    over a window of monotonic time, from the samples nearest its ends."""

    def __init__(self, groups: dict, interval_s: float = 0.25) -> None:
        self.groups = groups
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._seen: dict[str, dict[int, float]] = {name: {} for name in groups}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        now = time.monotonic()
        point = {}
        for name, pids in self.groups.items():
            seen = self._seen[name]
            for pid in pids():
                seen[pid] = max(seen.get(pid, 0.0), proc_cpu_s(pid))  # a process gone keeps its last
            point[name] = sum(seen.values())
        point["machine_busy"], point["machine_total"] = machine_busy_s()
        self.samples.append((now, point))

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a pid list query failing once loses one sample
                self._sample()
            self._stop.wait(self.interval_s)

    def _nearest(self, t: float) -> dict[str, float]:
        return min(self.samples, key=lambda s: abs(s[0] - t))[1]

    def between(self, t0: float, t1: float) -> dict[str, float]:
        a, b = self._nearest(t0), self._nearest(t1)
        return {name: round(b[name] - a[name], 2) for name in a}
