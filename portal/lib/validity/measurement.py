"""Validity checks on the measurement itself: was the generator the bottleneck, was the asked
arrival rate held, are there enough samples for each percentile, did the target drift, and did
SYN retransmissions (an overflowing accept backlog) pollute the connect times?"""

from __future__ import annotations

import statistics

from portal.lib.stats import hdr
from portal.lib.validity.verdict import FAIL, PASS, SKIP, WARN, finding, result, worst

# generator_saturation: the generator's CPU (% of one core: it is one process) and event-loop lag.
GEN_CPU_WARN_PCT = 85.0
LOOP_LAG_MEDIAN_WARN_MS = 10.0
LOOP_LAG_MAX_WARN_MS = 100.0
# arrival_rate (open loop): the achieved rate must reach this share of the asked one.
SCHEDULE_MIN_SHARE = 0.95
# sample_size: samples needed before a percentile means something (≥ 10 beyond the tail point).
PERCENTILE_MIN_SAMPLES = {"p50": 20, "p95": 200, "p99": 1000}
# drift: the second half of the window against the first (per-second medians of TTLB p50 / rps).
DRIFT_MIN_SECONDS = 4
DRIFT_WARN_PCT = 25.0
DRIFT_MIN_ABS_US = 200
# syn_retransmit: Linux retransmits an unanswered SYN after 1 s, then 3 s (2 s more), 7 s …
SYN_SLOW_CONNECT_US = 900_000
SYN_MODES_US = ((900_000, 1_400_000), (2_800_000, 3_600_000), (6_700_000, 7_800_000))


def _generator_of(arm: dict) -> tuple[dict, list[str]]:
    """One arm's generator CPU demand and loop lag over its seconds, and what crossed a threshold."""
    series = arm.get("series") or []
    # Demand: CPU used plus time spent waiting for a CPU (a generator starved by other work is
    # as much the bottleneck as one that uses a whole core).
    cpu = [
        p["gen_cpu_pct"] + (p.get("gen_runq_pct") or 0) for p in series if p.get("gen_cpu_pct") is not None
    ]
    runq = [p["gen_runq_pct"] for p in series if p.get("gen_runq_pct") is not None]
    lag = [p["loop_lag_ms"] for p in series if p.get("loop_lag_ms") is not None]
    entry = {
        "cpu_pct_median": round(statistics.median(cpu), 1) if cpu else None,
        "cpu_pct_max": round(max(cpu), 1) if cpu else None,
        "runq_wait_pct_median": round(statistics.median(runq), 1) if runq else None,
        "loop_lag_ms_median": round(statistics.median(lag), 3) if lag else None,
        "loop_lag_ms_max": max(lag) if lag else None,
    }
    reasons = []
    if cpu and entry["cpu_pct_median"] >= GEN_CPU_WARN_PCT:
        waited = entry["runq_wait_pct_median"]
        extra = f", of which {waited:.0f}% waiting for a CPU" if waited else ""
        reasons.append(f"generator CPU demand {entry['cpu_pct_median']:.0f}% (median{extra})")
    if lag and (
        entry["loop_lag_ms_median"] >= LOOP_LAG_MEDIAN_WARN_MS
        or entry["loop_lag_ms_max"] >= LOOP_LAG_MAX_WARN_MS
    ):
        median_ms, max_ms = entry["loop_lag_ms_median"], entry["loop_lag_ms_max"]
        reasons.append(f"event-loop lag {median_ms:.1f} ms median, {max_ms:.1f} ms max")
    return entry, reasons


def check_generator(config: dict, arms: dict[str, dict]) -> dict:
    evidence: dict[str, dict] = {}
    findings = []
    for name, arm in arms.items():
        evidence[name], reasons = _generator_of(arm)
        if reasons:
            findings.append(finding([name], WARN, f"{name}: {', '.join(reasons)}"))
    if findings:
        return result(
            "generator_saturation",
            WARN,
            f"The load generator was the bottleneck ({'; '.join(f['reason'] for f in findings)}): you "
            "measured the client. Use fewer users, a faster generator or more generator processes.",
            evidence,
            findings,
        )
    if all(
        entry["cpu_pct_median"] is None and entry["loop_lag_ms_median"] is None for entry in evidence.values()
    ):
        return result(
            "generator_saturation",
            SKIP,
            "Not judged: no arm recorded a whole second of generator CPU or event-loop lag.",
        )
    return result(
        "generator_saturation",
        PASS,
        f"The generator stayed below {GEN_CPU_WARN_PCT:.0f}% CPU with event-loop lag below "
        f"{LOOP_LAG_MEDIAN_WARN_MS:.0f} ms (median) in every arm.",
        evidence,
    )


def check_schedule(config: dict, arms: dict[str, dict]) -> dict | None:
    """Open loop only: did every arm hold the asked arrival rate?"""
    rate = config.get("arrival_rate")
    if not rate:
        return None
    evidence = {}
    findings = []
    for name, arm in arms.items():
        late_share = (arm.get("late_requests") or 0) / arm["requests"] if arm["requests"] else 0.0
        evidence[name] = {
            "asked_rps": rate,
            "achieved_rps": arm["rps"],
            "late_share": round(late_share, 4),
            "max_schedule_lag_us": arm.get("max_schedule_lag_us", 0),
        }
        if arm["rps"] < SCHEDULE_MIN_SHARE * rate:
            findings.append(finding([name], WARN, f"{name} reached {arm['rps']:.0f} of {rate:g} req/s"))
    if findings:
        return result(
            "arrival_rate",
            WARN,
            f"The schedule was not held ({'; '.join(f['reason'] for f in findings)}): each of the "
            f"{config.get('users')} users waits for its answer, so the latencies include the queueing "
            "behind the schedule. Add users.",
            evidence,
            findings,
        )
    return result(
        "arrival_rate",
        PASS,
        f"Every arm held {rate:g} req/s (≥ {100 * SCHEDULE_MIN_SHARE:.0f}%); latencies count from the "
        "scheduled start.",
        evidence,
    )


def check_sample_size(arms: dict[str, dict]) -> dict:
    short: dict[str, dict] = {}
    findings = []
    for name, arm in arms.items():
        count = (arm.get("ttlb_us") or {}).get("count", 0)
        missing = [p for p, need in PERCENTILE_MIN_SAMPLES.items() if count < need]
        if missing:
            short[name] = {"samples": count, "too_few_for": missing}
            findings.append(
                finding(
                    [name],
                    FAIL if "p50" in missing else WARN,
                    f"{name}: {count:,} samples, too few for {', '.join(missing)}",
                )
            )
    if not short:
        return result(
            "sample_size",
            PASS,
            "Every arm has enough samples for p50, p95 and p99 (≥ 1,000 each).",
            {name: {"samples": (arm.get("ttlb_us") or {}).get("count", 0)} for name, arm in arms.items()},
        )
    needs = ", ".join(f"{p} ≥ {n:,}" for p, n in PERCENTILE_MIN_SAMPLES.items())
    return result(
        "sample_size",
        worst(findings),
        f"{'; '.join(f['reason'] for f in findings)} (needs {needs}). The page shows such percentiles in "
        "parentheses; measure longer or with more users.",
        short,
        findings,
    )


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _drift_of(arm: dict) -> tuple[dict, list[str]]:
    """One arm's halves (and first and last round) compared: the evidence and what moved."""
    series = arm.get("series") or []
    half = len(series) // 2
    first, second = series[:half], series[len(series) - half :]
    entry: dict = {}
    moved = []
    for key, label in (("p50_us", "TTLB p50"), ("requests", "req/s")):
        a, b = _median([p.get(key) for p in first]), _median([p.get(key) for p in second])
        if a is None or b is None or a == 0:
            continue
        change = 100.0 * (b - a) / a
        entry[key] = {"first_half": a, "second_half": b, "change_pct": round(change, 1)}
        big_enough = abs(b - a) >= DRIFT_MIN_ABS_US if key == "p50_us" else True
        if abs(change) >= DRIFT_WARN_PCT and big_enough:
            moved.append(f"{label} {a:g} → {b:g} ({change:+.0f}%)")
    rounds = [r.get("ttlb_p50_us") for r in arm.get("rounds") or []]
    if len(rounds) >= 2 and rounds[0] and rounds[-1]:
        change = 100.0 * (rounds[-1] - rounds[0]) / rounds[0]
        entry["rounds_p50_us"] = {"first": rounds[0], "last": rounds[-1], "change_pct": round(change, 1)}
        if abs(change) >= DRIFT_WARN_PCT and abs(rounds[-1] - rounds[0]) >= DRIFT_MIN_ABS_US:
            moved.append(f"TTLB p50 first round {rounds[0]} µs → last round {rounds[-1]} µs")
    return entry, moved


def check_drift(arms: dict[str, dict]) -> dict:
    evidence: dict[str, dict] = {}
    findings = []
    unjudged = []
    for name, arm in arms.items():
        if len(arm.get("series") or []) < DRIFT_MIN_SECONDS:
            unjudged.append(name)
            continue
        evidence[name], moved = _drift_of(arm)
        if moved:
            findings.append(finding([name], WARN, f"{name}: {', '.join(moved)}"))
    if findings:
        return result(
            "drift",
            WARN,
            f"The target changed during the measurement ({'; '.join(f['reason'] for f in findings)}): "
            "something else was going on (caches, GC, other load). Use rounds to spread it over the arms, "
            "or rerun.",
            evidence,
            findings,
        )
    if not evidence:
        return result(
            "drift",
            SKIP,
            f"Not judged: every arm measured fewer than {DRIFT_MIN_SECONDS} seconds, too short to compare "
            "its halves. Measure longer.",
        )
    note = f" Not judged (fewer than {DRIFT_MIN_SECONDS} seconds): {', '.join(unjudged)}." if unjudged else ""
    return result(
        "drift",
        PASS,
        f"First and second half of each window agree within {DRIFT_WARN_PCT:.0f}%.{note}",
        evidence,
    )


def _slow_connects(arm: dict) -> tuple[int, list[int]]:
    """Connects ≥ 0.9 s, and how many fall in each SYN-retransmit mode (1 s, 3 s, 7 s)."""
    h = hdr.decode((arm.get("hdr") or {}).get("connect_us"))
    if h is None:
        return 0, [0, 0, 0]
    slow = 0
    modes = [0, 0, 0]
    for value, count in hdr.highest_values(h):
        if value < SYN_SLOW_CONNECT_US:
            continue
        slow += count
        for i, (lo, hi) in enumerate(SYN_MODES_US):
            if lo <= value <= hi:
                modes[i] += count
    return slow, modes


def check_syn_retransmit(arms: dict[str, dict]) -> dict:
    evidence = {}
    opened = False
    for name, arm in arms.items():
        opened = opened or bool((arm.get("hdr") or {}).get("connect_us"))
        slow, modes = _slow_connects(arm)
        if slow:
            evidence[name] = {
                "slow_connects": slow,
                "near_1s": modes[0],
                "near_3s": modes[1],
                "near_7s": modes[2],
                "connections": arm.get("connections_opened", 0),
            }
    if not evidence:
        if not opened:
            return result(
                "syn_retransmit",
                SKIP,
                "Not judged: no arm opened a TCP connection in its measured window (keep-alive arms connect "
                "during the warm-up).",
            )
        return result("syn_retransmit", PASS, "No TCP connect took 0.9 s or longer.")
    findings = [
        finding(
            [name],
            WARN,
            f"{name}: {e['slow_connects']:,} of {e['connections']:,} connects ≥ 0.9 s "
            f"({e['near_1s']} near 1 s, {e['near_3s']} near 3 s)",
        )
        for name, e in evidence.items()
    ]
    return result(
        "syn_retransmit",
        WARN,
        f"{'; '.join(f['reason'] for f in findings)}. Connects of about 1 s and 3 s are SYN retransmissions: "
        "the server's accept backlog (listen queue) overflowed and the kernel dropped SYNs. Those requests "
        "measure the queue, not TLS — the '> 1000 ms' tail. Raise the listen backlog (net.core.somaxconn, "
        "the server's backlog) or add workers, or use fewer users.",
        evidence,
        findings,
    )
