"""Capacity: judge a saturation search's stages and find each arm's knee (issue 15, DESIGN §7).

Django-free and pure. The engine turns each stage's arm result into a point (``stage_point``) and
asks ``portal.lib.stats.saturation.next_load`` (which uses ``verdicts``) where to go next; the report's
``capacity`` key is ``section(Run.capacity)``. Documented in docs/report-schema.md ("capacity").

A stage is *good* unless one of these holds, checked in this order, each against the last good stage
below it (the ``ref``) or the lowest stage (the ``base``):

- ``errors``: more than ``ERROR_RATE_MAX`` of its requests failed;
- ``generator``: the engine was the bottleneck: its CPU + run-queue wait reached ``GEN_BUSY_PCT`` of
  one core, or its event loop woke ``GEN_LAG_MS`` late (median second). Its figures say nothing of
  the server, so the search stops there;
- ``shortfall`` (rate mode): it sent less than ``RATE_SHORTFALL`` of the asked rate;
- ``flat``: throughput rose by less than ``MIN_GAIN`` of the load's rise (a doubling: < 10 %);
- ``latency``: TTLB p50 above ``LAT_P50_FACTOR`` × the base's (and ``LAT_P50_FLOOR_US`` more), or
  p99 above ``LAT_P99_FACTOR`` × (and ``LAT_P99_FLOOR_US`` more).

The knee is the good stage with the highest throughput (``max_rps``); ``limited_by`` is what the first
bad stage above it shows: ``errors``, ``generator``, or ``server`` (shortfall, flat or latency); null
when the search reached its ``max`` load with every stage good.
"""

from __future__ import annotations

import math
import statistics

from portal.lib.stats import hdr

ERROR_RATE_MAX = 0.01
GEN_BUSY_PCT = 85.0
GEN_LAG_MS = 50.0
RATE_SHORTFALL = 0.9
MIN_GAIN = 0.1
LAT_P50_FACTOR, LAT_P50_FLOOR_US = 3.0, 500
LAT_P99_FACTOR, LAT_P99_FLOOR_US = 10.0, 5000
# A generator process is planned at this much of one core, leaving room for the loop to keep time.
GEN_BUDGET_PCT = 70.0
FRACTIONS = (0.5, 0.8, 1.0)
LIMITS = {
    "cut_short": None,
    "errors": "errors",
    "generator": "generator",
    "shortfall": "server",
    "flat": "server",
    "latency": "server",
}


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def stage_point(result: dict, load: float, phase: str, mode: str) -> dict:
    """One stage of the search from its arm result (``Swarm.run_arm``): the figures judged here."""
    hist = hdr.decode((result.get("hist") or {}).get("ttlb_us"))
    p50 = p99 = None
    if hist is not None and hist.total_count:
        at = hdr.values_at_percentiles(hist, (50, 99))
        p50, p99 = at[50], at[99]
    requests, failures = result.get("requests", 0), result.get("failures", 0)
    measured_s = result.get("measured_s") or 0.0
    series = result.get("series") or []
    cpu = _median([s.get("gen_cpu_pct") for s in series])
    new = (result.get("connections_opened") or 0) - (result.get("tls_sessions_reused") or 0)
    rps = result.get("rps") or 0.0
    return {
        "load": load,
        "phase": phase,
        "users": result.get("users"),
        "rate": result.get("arrival_rate") if mode == "rate" else None,
        "requests": requests,
        "failures": failures,
        "error_rate": round(failures / (requests + failures), 6) if requests + failures else 0.0,
        "measured_s": measured_s,
        "rps": rps,
        "new_connections_per_s": round(new / measured_s, 3) if measured_s > 0 else 0.0,
        "ttlb_p50_us": p50,
        "ttlb_p99_us": p99,
        "gen_cpu_pct": cpu,
        "gen_runq_pct": _median([s.get("gen_runq_pct") for s in series]),
        "loop_lag_ms": _median([s.get("loop_lag_ms") for s in series]),
        "gen_cpu_us_per_request": round(cpu * 1e4 / rps, 3) if cpu is not None and rps > 0 else None,
        "complete": result.get("complete", True),
    }


def generator_busy(point: dict) -> bool:
    demand = (point.get("gen_cpu_pct") or 0.0) + (point.get("gen_runq_pct") or 0.0)
    return demand >= GEN_BUSY_PCT or (point.get("loop_lag_ms") or 0.0) >= GEN_LAG_MS


def _latency_knee(point: dict, base: dict) -> bool:
    p50, p99, b50, b99 = (
        point["ttlb_p50_us"],
        point["ttlb_p99_us"],
        base["ttlb_p50_us"],
        base["ttlb_p99_us"],
    )
    if None in (p50, p99, b50, b99):
        return False
    return (p50 > LAT_P50_FACTOR * b50 and p50 - b50 > LAT_P50_FLOOR_US) or (
        p99 > LAT_P99_FACTOR * b99 and p99 - b99 > LAT_P99_FLOOR_US
    )


def judge(point: dict, ref: dict | None, base: dict | None, mode: str) -> str:
    """One stage's verdict (module docstring): good, errors, generator, shortfall, flat or latency;
    cut_short for a stage the run's cancel ended early (not judged)."""
    if point.get("complete") is False:
        return "cut_short"
    if point["requests"] == 0 or point["error_rate"] > ERROR_RATE_MAX:
        return "errors"
    if generator_busy(point):
        return "generator"
    if mode == "rate" and point["rps"] < RATE_SHORTFALL * point["load"]:
        return "shortfall"
    if ref is not None and ref["rps"] > 0 and point["load"] > ref["load"]:
        load_gain = point["load"] / ref["load"] - 1
        if point["rps"] / ref["rps"] - 1 < MIN_GAIN * load_gain:
            return "flat"
    if base is not None and base is not point and _latency_knee(point, base):
        return "latency"
    return "good"


def verdicts(points: list[dict], mode: str) -> list[str]:
    """Each point's verdict (in the given order), judged in ascending load."""
    order = sorted(range(len(points)), key=lambda i: points[i]["load"])
    out = [""] * len(points)
    ref = None
    base = points[order[0]] if order else None
    for i in order:
        out[i] = judge(points[i], ref, base, mode)
        if out[i] == "good":
            ref = points[i]
    return out


def _at_fractions(good: list[dict], max_rps: float) -> list[dict]:
    """Latency at 50/80/100 % of max_rps: the good stage whose throughput is nearest (measured, not
    interpolated; its own rps is shown beside the target)."""
    rows = []
    for fraction in FRACTIONS:
        target = fraction * max_rps
        near = min(good, key=lambda p: abs(p["rps"] - target))
        rows.append(
            {
                "fraction": fraction,
                "target_rps": round(target, 3),
                "rps": near["rps"],
                "load": near["load"],
                "ttlb_p50_us": near["ttlb_p50_us"],
                "ttlb_p99_us": near["ttlb_p99_us"],
            }
        )
    return rows


def generators_needed(points: list[dict], sat: dict) -> dict | None:
    """How many generator processes the search's max load would take, from the generator CPU per
    request measured at the busiest stage: rate mode asks ``max`` req/s; users mode ``max`` users at
    the per-user rate of the lowest stage."""
    measured = [p for p in points if p.get("gen_cpu_us_per_request")]
    if not measured:
        return None
    busiest = max(measured, key=lambda p: p["rps"])
    lowest = min(points, key=lambda p: p["load"])
    wanted = sat["max"] if sat["mode"] == "rate" else lowest["rps"] / max(lowest["load"], 1) * sat["max"]
    cpu_us = busiest["gen_cpu_us_per_request"]
    one = GEN_BUDGET_PCT / 100 * 1e6 / cpu_us
    return {
        "wanted_rps": round(wanted, 3),
        "gen_cpu_us_per_request": cpu_us,
        "rps_per_generator": round(one, 3),
        "processes": max(2, math.ceil(wanted / one)),
    }


def arm_capacity(name: str, points: list[dict], sat: dict) -> dict:
    """The report's ``capacity[name]``."""
    mode = sat["mode"]
    marks = verdicts(points, mode)
    judged = sorted(
        ({**p, "verdict": v} for p, v in zip(points, marks, strict=True)),
        key=lambda p: (p["load"], p["phase"]),
    )
    good = [p for p in judged if p["verdict"] == "good"]
    knee = max(good, key=lambda p: p["rps"]) if good else None
    above = [p for p in judged if p["verdict"] != "good" and (knee is None or p["load"] > knee["load"])]
    bad = [p for p in judged if p["verdict"] != "good"]
    first_bad = above[0] if above else (bad[0] if bad else None)
    limited_by = LIMITS[first_bad["verdict"]] if first_bad else None
    if first_bad and any(p["verdict"] == "generator" and p["load"] <= first_bad["load"] for p in judged):
        limited_by = "generator"  # the generator saturated first: what follows is not the server's
    entry = {
        "mode": mode,
        "max_rps": knee["rps"] if knee else None,
        "knee": _knee(knee, mode),
        "limited_by": limited_by,
        "first_bad": {"load": first_bad["load"], "verdict": first_bad["verdict"]} if first_bad else None,
        "at_fraction": _at_fractions(good, knee["rps"]) if knee else [],
        "generators_needed": generators_needed(points, sat) if limited_by == "generator" else None,
        "points": judged,
    }
    if name == "tls_new" or name.startswith("tls_new"):
        entry["max_handshakes_per_s"] = knee["new_connections_per_s"] if knee else None
    return entry


def _knee(knee: dict | None, mode: str) -> dict | None:
    if knee is None:
        return None
    return {
        mode: knee["load"],
        "rps": knee["rps"],
        "ttlb_p50_us": knee["ttlb_p50_us"],
        "ttlb_p99_us": knee["ttlb_p99_us"],
    }


def section(stored: dict | None) -> dict | None:
    """The report's ``capacity``: ``{"<arm>": arm_capacity(...)}`` from ``Run.capacity``
    (``{"settings": saturation settings, "arms": {"<arm>": [points]}}``); null without a search."""
    if not stored or not stored.get("arms"):
        return None
    sat = stored["settings"]
    return {name: arm_capacity(name, points, sat) for name, points in stored["arms"].items() if points}


def tls_cost_words(capacity: dict | None) -> str | None:
    """The capacity cost of TLS in one sentence, only from evidence: both arms measured, both knees
    the server's. Otherwise what stood in the way; None without a search of tls_new or plain."""
    if not capacity:
        return None
    tls = capacity.get("tls_new")
    plain = capacity.get("plain") or capacity.get("plain_new")
    plain_name = "plain" if capacity.get("plain") else "plain_new"
    if tls is None or plain is None:
        return None
    for name, entry in (("tls_new", tls), (plain_name, plain)):
        if entry["limited_by"] != "server" or entry["max_rps"] is None:
            why = {
                "generator": "the generator saturated first, so its knee is not the server's",
                "errors": "errors appeared before throughput levelled off",
                None: "the search reached its maximum load without a knee",
            }.get(entry["limited_by"], "no stage was good")
            return f"No capacity cost of TLS is claimed: for {name}, {why}."
    what = "plain requests/s" if plain_name == "plain" else "plain new connections/s"
    return (
        f"Handshakes cap this server at {tls['max_handshakes_per_s']:,.0f} new TLS connections/s against "
        f"{plain['max_rps']:,.0f} {what} ({tls['max_handshakes_per_s'] / plain['max_rps']:.0%})."
    )


def report_lines(report: dict) -> list[str]:
    """The capacity search as ``tollgate run`` prints it without ``--json``."""
    section = report.get("capacity") or {}
    lines = []
    for name, entry in section.items():
        knee = entry["knee"]
        limit = entry["limited_by"] or "nothing up to the search's maximum"
        if knee:
            load = f"{knee[entry['mode']]:g} {'users' if entry['mode'] == 'users' else 'req/s asked'}"
            lines.append(
                f"capacity {name}: max {entry['max_rps']:,.0f} req/s at {load}, TTLB p50 "
                f"{knee['ttlb_p50_us'] / 1000:.3f} ms, p99 {knee['ttlb_p99_us'] / 1000:.3f} ms; "
                f"limited by {limit}"
            )
        else:
            lines.append(f"capacity {name}: no good stage; limited by {limit}")
        if entry.get("max_handshakes_per_s"):
            lines.append(f"  max full handshakes: {entry['max_handshakes_per_s']:,.0f}/s")
        needed = entry.get("generators_needed")
        if needed:
            lines.append(
                f"  the generator saturated: {needed['processes']} generator processes for "
                f"{needed['wanted_rps']:,.0f} req/s "
                f"({needed['gen_cpu_us_per_request']:g} µs of generator CPU per request)"
            )
    if report.get("capacity_cost"):
        lines.append(f"capacity {report['capacity_cost']}")
    return lines
