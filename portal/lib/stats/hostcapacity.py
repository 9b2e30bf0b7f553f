"""A generator host's measured capacity: requests per generator CPU-second, from its runs' arms and
from ``bench/generator``'s figures when an operator recorded them (the operators' page, portal/ops).

Pure functions on plain data. An arm is "keep-alive" or "new connection" (``*_new`` arms: a
handshake per request), the two rates differ some 30-fold (docs/scaling.md). Medians, with the
number of arms they come from.
"""

from __future__ import annotations

import statistics

KINDS = ("keep-alive", "new connection")
BENCH_ARMS = ("plain", "tls", "tls_new")


def kind(arm: str) -> str:
    return "new connection" if arm.endswith("_new") else "keep-alive"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def arm_rates(arm: str, rps: float, series: list[dict], generators: list[dict], host: str) -> list[tuple]:
    """``(host, kind, requests per generator CPU-second)`` measured by one stored arm.

    Distributed arms (``generators`` listed): each Locust worker's own requests and CPU seconds,
    summed per host. A single-process arm (run on ``host``): its rate over the median generator CPU
    of its measured seconds (``gen_cpu_pct``, of one core), as ``portal.lib.stats.capacity`` reads it."""
    if generators:
        per_host: dict[str, list[float]] = {}
        for worker in generators:
            figures = (worker.get("arms") or {}).get(arm) or {}
            if worker.get("lost_at") is None and figures.get("cpu_s"):
                sums = per_host.setdefault(worker.get("host") or "?", [0.0, 0.0])
                sums[0] += figures.get("requests") or 0
                sums[1] += figures["cpu_s"]
        return [(h, kind(arm), round(req / cpu, 1)) for h, (req, cpu) in per_host.items() if cpu > 0]
    cpu_pct = _median([p["gen_cpu_pct"] for p in series if p.get("gen_cpu_pct")])
    if not host or not cpu_pct or rps <= 0:
        return []
    return [(host, kind(arm), round(rps * 100.0 / cpu_pct, 1))]


def summarize(rates: list[tuple]) -> dict[str, dict[str, dict]]:
    """host → kind → ``{"per_cpu_s": median, "arms": n}`` over the given arm rates."""
    grouped: dict[str, dict[str, list[float]]] = {}
    for host, arm_kind, rate in rates:
        grouped.setdefault(host, {}).setdefault(arm_kind, []).append(rate)
    return {
        host: {k: {"per_cpu_s": round(_median(v), 1), "arms": len(v)} for k, v in kinds.items()}
        for host, kinds in grouped.items()
    }


def bench_figures(report: dict) -> dict:
    """``bench/generator``'s last line → what the operators' page shows: the engine's requests per
    CPU-second for its ``plain``, ``tls`` (keep-alive) and ``tls_new`` arms, the host's cores."""
    engine = report.get("engine")
    if not isinstance(engine, dict) or not all(isinstance(engine.get(a), dict) for a in BENCH_ARMS):
        raise ValueError("not bench/generator's full report (its last line, without --only overhead)")
    out: dict = {arm: engine[arm].get("per_cpu_s") for arm in BENCH_ARMS}
    out["cores"] = (report.get("machine") or {}).get("cores")
    out["users"] = (report.get("settings") or {}).get("users")
    return out
