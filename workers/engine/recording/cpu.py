"""The generator's own CPU use: a saturated generator measures itself, not the server (the report's
``generator`` check). ``CpuMeter`` per arm on one process and per Locust worker of a distributed run;
``process_cpu_s`` a worker's CPU over its window (``cpu_s`` in its share)."""

from __future__ import annotations

import os
import time


def process_cpu_s() -> float:
    """This process's CPU time (user + system), in seconds."""
    times = os.times()
    return times.user + times.system


def _run_queue_wait_s() -> float | None:
    """Seconds this process's threads have waited on a run queue (runnable, but another task had the
    CPU), from /proc/<pid>/task/*/schedstat; None where the kernel does not provide it."""
    total = 0
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/schedstat") as f:
                total += int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9


class CpuMeter:
    """This process's CPU use between calls, in % of one core (user + system, all threads), and the
    time it wanted a CPU but waited for one (run-queue wait), in % of wall time.

    CPU % alone hides a starved generator: on a busy machine the engine may get 60% of a core while
    wanting all of it. CPU + run-queue wait is its demand; near 100% it is the bottleneck either way.
    """

    def __init__(self) -> None:
        self._last = self._now()

    @staticmethod
    def _now() -> tuple[float, float, float | None]:
        t = os.times()
        return t.user + t.system, time.monotonic(), _run_queue_wait_s()

    def sample(self) -> tuple[float, float | None]:
        cpu, wall, wait = self._now()
        last_cpu, last_wall, last_wait = self._last
        self._last = (cpu, wall, wait)
        if wall <= last_wall:
            return 0.0, None
        cpu_pct = round(100.0 * (cpu - last_cpu) / (wall - last_wall), 1)
        wait_pct = None
        if wait is not None and last_wait is not None:
            wait_pct = round(100.0 * (wait - last_wait) / (wall - last_wall), 1)
        return cpu_pct, wait_pct

    def percent(self) -> float:
        return self.sample()[0]
