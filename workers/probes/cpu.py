"""What a CPU sampler's samples say (``workers.probes.ssh.CpuSampler``): the sampled processes' CPU
seconds inside a measured window, a per-second timeline, and the moving average the report shows.
Django-free, pure functions over ``Sample``s."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sample:
    t: float  # local wall clock (time.time()) when the sample arrived
    uptime_s: float  # the server's own clock (monotonic), for intervals
    host_busy: int  # jiffies, all CPUs: everything but idle and iowait
    host_total: int
    procs: dict[int, dict] = field(default_factory=dict)  # pid -> {"cpu": utime+stime, "threads", "comm"}


def _cumulative(samples: list[Sample]) -> list[float]:
    """Total jiffies of the sampled processes at each sample, carried across processes that vanish
    (a worker that exits keeps what it used) and starting new ones from 0."""
    last: dict[int, int] = {}
    totals = []
    for s in samples:
        for pid, proc in s.procs.items():
            last[pid] = proc["cpu"]
        totals.append(float(sum(last.values())))
    return totals


def _at(times: list[float], values: list[float], t: float) -> float:
    """Linear interpolation of values over times at t (clamped to the ends)."""
    if t <= times[0]:
        return values[0]
    for k in range(1, len(times)):
        if t <= times[k]:
            t0, t1 = times[k - 1], times[k]
            frac = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
            return values[k - 1] + frac * (values[k] - values[k - 1])
    return values[-1]


def cpu_in_window(samples: list[Sample], hz: int, start: float, end: float) -> dict | None:
    """CPU seconds the sampled processes used in [start, end] (local wall clock).

    The cumulative jiffies are interpolated linearly at both edges between the samples that bracket
    them, so neither the warm-up before nor the idle time after leaks in. Needs a sample at or before
    ``start`` and one at or after ``end``.
    """
    if not samples or samples[0].t > start or samples[-1].t < end:
        return None
    times = [s.t for s in samples]
    totals = _cumulative(samples)
    cpu_jiffies = _at(times, totals, end) - _at(times, totals, start)
    inside = [s for s in samples if start <= s.t <= end]
    bracket = [s for s in samples if s.t <= start][-1:] + inside + [s for s in samples if s.t >= end][:1]
    host_busy = bracket[-1].host_busy - bracket[0].host_busy
    host_total = bracket[-1].host_total - bracket[0].host_total
    timeline = []
    for a, b in zip(bracket, bracket[1:], strict=False):
        dt = b.uptime_s - a.uptime_s
        if dt <= 0:
            continue
        used = sum(proc["cpu"] - a.procs.get(pid, {"cpu": 0})["cpu"] for pid, proc in b.procs.items())
        timeline.append(
            {
                "epoch_s": round(b.t, 3),
                "cpu_pct": round(100.0 * used / hz / dt, 1),
                "threads": sum(proc["threads"] for proc in b.procs.values()),
                "host_cpu_pct": round(
                    100.0 * (b.host_busy - a.host_busy) / max(b.host_total - a.host_total, 1), 1
                ),
            }
        )
    return {
        "cpu_s": round(cpu_jiffies / hz, 6),
        "window_s": round(end - start, 3),
        "samples": len(inside),
        "processes": len({pid for s in bracket for pid in s.procs}),
        "host_cpu_pct": round(100.0 * host_busy / host_total, 1) if host_total else None,
        "timeline": timeline,
    }


def moving_average(values: list[float | None], width: int = 15) -> list[float | None]:
    """Trailing moving average over ``width`` points (the SAP study's 15 s average)."""
    out: list[float | None] = []
    for i in range(len(values)):
        window = [v for v in values[max(0, i - width + 1) : i + 1] if v is not None]
        out.append(round(sum(window) / len(window), 1) if window else None)
    return out
