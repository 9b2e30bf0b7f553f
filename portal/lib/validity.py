"""Validity checks: would an auditor accept these numbers? Each check says pass, warn or fail and why.

Pure functions over the report's arm sections (``portal.lib.report.arm_section``) and the run's
config, recomputed on every read, so a threshold change re-judges old runs too. Each result is
``{"check", "status": "pass"|"warn"|"fail", "detail", "evidence"}``; ``detail`` is one or two plain
sentences, ``evidence`` the numbers behind them (per arm). Thresholds are module constants and are
documented in docs/report-schema.md.
"""

from __future__ import annotations

import statistics

from portal.lib import hdr

PASS, WARN, FAIL = "pass", "warn", "fail"

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
# errors: transport errors (timeouts, resets) as a share of requests.
ERRORS_FAIL_SHARE = 0.01
# tls_resumption: share of tls_resumed connections that must really resume.
RESUMPTION_MIN_SHARE = 0.9
AUTH_STATUSES = ("401", "403", "407")


def result(check: str, status: str, detail: str, evidence: dict | None = None) -> dict:
    return {"check": check, "status": status, "detail": detail, "evidence": evidence or {}}


def expected_label(expected: list[int]) -> str:
    if not expected:
        return "2xx"
    classes = sorted({code // 100 for code in expected})
    parts = []
    for cls in classes:
        codes = [c for c in expected if c // 100 == cls]
        parts.append(f"{cls}xx" if len(codes) == 100 else ", ".join(str(c) for c in codes))
    return ", ".join(parts)


def is_expected(code: int, expected: list[int]) -> bool:
    return code in expected if expected else 200 <= code < 300


def check_status_codes(config: dict, arms: dict[str, dict]) -> dict:
    expected = config.get("expected_status") or []
    bad: dict[str, dict] = {}
    for name, arm in arms.items():
        wrong = {code: n for code, n in arm["status_codes"].items() if not is_expected(int(code), expected)}
        if wrong:
            total = sum(arm["status_codes"].values())
            bad[name] = {"unexpected": wrong, "of": total}
    label = expected_label(expected)
    if not bad:
        return result("status_codes", PASS, f"Every answer was in the expected set ({label}).")
    parts = []
    for name, entry in bad.items():
        n = sum(entry["unexpected"].values())
        codes = ", ".join(f"{code}×{count}" for code, count in entry["unexpected"].items())
        parts.append(f"{name}: {codes} ({100 * n / entry['of']:.1f}% of {entry['of']})")
    return result(
        "status_codes",
        FAIL,
        f"Answers outside the expected set ({label}): {'; '.join(parts)}. Latencies of error answers "
        "measure the error path, not the page.",
        bad,
    )


def check_errors(arms: dict[str, dict]) -> dict:
    evidence = {}
    worst = 0.0
    for name, arm in arms.items():
        count = sum(entry["count"] for entry in (arm.get("errors") or {}).values())
        if count:
            share = count / max(arm["requests"], 1)
            worst = max(worst, share)
            evidence[name] = {kind: entry["count"] for kind, entry in arm["errors"].items()}
    if not evidence:
        return result("errors", PASS, "No transport errors (timeouts, resets, refused connections).")
    detail = "; ".join(
        f"{name}: " + ", ".join(f"{k}×{v}" for k, v in kinds.items()) for name, kinds in evidence.items()
    )
    status = FAIL if worst >= ERRORS_FAIL_SHARE else WARN
    return result(
        "errors", status, f"Transport errors: {detail}. Failed requests are not in the latencies.", evidence
    )


def check_content_length(arms: dict[str, dict]) -> dict:
    varying: dict[str, dict] = {}
    by_path: dict[str, dict[str, list[int]]] = {}
    for name, arm in arms.items():
        for path, sizes in (arm.get("sizes_by_path") or {}).items():
            if len(sizes) > 1:
                varying.setdefault(name, {})[path] = sizes
            by_path.setdefault(path, {})[name] = sizes
    mismatched = {
        path: per_arm
        for path, per_arm in by_path.items()
        if len(per_arm) > 1
        and all(len(sizes) == 1 for sizes in per_arm.values())
        and len({sizes[0] for sizes in per_arm.values()}) > 1
    }
    if mismatched:
        parts = [
            f"{path}: " + ", ".join(f"{name} {sizes[0]} B" for name, sizes in per_arm.items())
            for path, per_arm in mismatched.items()
        ]
        return result(
            "content_length",
            FAIL,
            f"The arms were served different bodies for the same path ({'; '.join(parts)}): they did not "
            "measure the same page, so their difference is not the cost of TLS.",
            {"mismatched": mismatched, "varying": varying},
        )
    if varying:
        parts = [
            f"{name} {path}: {len(sizes)} sizes {min(sizes)}–{max(sizes)} B"
            for name, paths in varying.items()
            for path, sizes in paths.items()
        ]
        return result(
            "content_length",
            WARN,
            f"Body size varies within an arm ({'; '.join(parts)}): a dynamic page adds its own spread "
            "to the latencies.",
            {"varying": varying},
        )
    return result("content_length", PASS, "Every path had one body size, the same in every arm.")


def check_generator(config: dict, arms: dict[str, dict]) -> dict:
    evidence: dict[str, dict] = {}
    reasons = []
    for name, arm in arms.items():
        series = arm.get("series") or []
        # Demand: CPU used plus time spent waiting for a CPU (a generator starved by other work is
        # as much the bottleneck as one that uses a whole core).
        cpu = [
            p["gen_cpu_pct"] + (p.get("gen_runq_pct") or 0)
            for p in series
            if p.get("gen_cpu_pct") is not None
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
        evidence[name] = entry
        if cpu and entry["cpu_pct_median"] >= GEN_CPU_WARN_PCT:
            waited = entry["runq_wait_pct_median"]
            extra = f", of which {waited:.0f}% waiting for a CPU" if waited else ""
            reasons.append(f"{name}: generator CPU demand {entry['cpu_pct_median']:.0f}% (median{extra})")
        if lag and (
            entry["loop_lag_ms_median"] >= LOOP_LAG_MEDIAN_WARN_MS
            or entry["loop_lag_ms_max"] >= LOOP_LAG_MAX_WARN_MS
        ):
            reasons.append(
                f"{name}: event-loop lag {entry['loop_lag_ms_median']:.1f} ms median, "
                f"{entry['loop_lag_ms_max']:.1f} ms max"
            )
    if reasons:
        return result(
            "generator_saturation",
            WARN,
            f"The load generator was the bottleneck ({'; '.join(reasons)}): you measured the client. "
            "Use fewer users, a faster generator or more generator processes.",
            evidence,
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
    short = []
    for name, arm in arms.items():
        late_share = (arm.get("late_requests") or 0) / arm["requests"] if arm["requests"] else 0.0
        evidence[name] = {
            "asked_rps": rate,
            "achieved_rps": arm["rps"],
            "late_share": round(late_share, 4),
            "max_schedule_lag_us": arm.get("max_schedule_lag_us", 0),
        }
        if arm["rps"] < SCHEDULE_MIN_SHARE * rate:
            short.append(f"{name} reached {arm['rps']:.0f} of {rate:g} req/s")
    if short:
        return result(
            "arrival_rate",
            WARN,
            f"The schedule was not held ({'; '.join(short)}): each of the {config.get('users')} users "
            "waits for its answer, so the latencies include the queueing behind the schedule. Add users.",
            evidence,
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
    fail = False
    for name, arm in arms.items():
        count = (arm.get("ttlb_us") or {}).get("count", 0)
        missing = [p for p, need in PERCENTILE_MIN_SAMPLES.items() if count < need]
        if missing:
            short[name] = {"samples": count, "too_few_for": missing}
            fail = fail or "p50" in missing
    if not short:
        return result(
            "sample_size",
            PASS,
            "Every arm has enough samples for p50, p95 and p99 (≥ 1,000 each).",
            {name: {"samples": (arm.get("ttlb_us") or {}).get("count", 0)} for name, arm in arms.items()},
        )
    parts = [
        f"{name}: {e['samples']} samples, too few for {', '.join(e['too_few_for'])}"
        for name, e in short.items()
    ]
    needs = ", ".join(f"{p} ≥ {n}" for p, n in PERCENTILE_MIN_SAMPLES.items())
    return result(
        "sample_size",
        FAIL if fail else WARN,
        f"{'; '.join(parts)} (needs {needs}). The page shows such percentiles in parentheses; measure "
        "longer or with more users.",
        short,
    )


def _median(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def check_drift(arms: dict[str, dict]) -> dict:
    evidence: dict[str, dict] = {}
    reasons = []
    judged = 0
    for name, arm in arms.items():
        series = arm.get("series") or []
        if len(series) < DRIFT_MIN_SECONDS:
            continue
        judged += 1
        half = len(series) // 2
        first, second = series[:half], series[len(series) - half :]
        entry = {}
        for key, label in (("p50_us", "TTLB p50"), ("requests", "req/s")):
            a, b = _median([p.get(key) for p in first]), _median([p.get(key) for p in second])
            if a is None or b is None or a == 0:
                continue
            change = 100.0 * (b - a) / a
            entry[key] = {"first_half": a, "second_half": b, "change_pct": round(change, 1)}
            big_enough = abs(b - a) >= DRIFT_MIN_ABS_US if key == "p50_us" else True
            if abs(change) >= DRIFT_WARN_PCT and big_enough:
                reasons.append(f"{name}: {label} {a:g} → {b:g} ({change:+.0f}%)")
        rounds = [r.get("ttlb_p50_us") for r in arm.get("rounds") or []]
        if len(rounds) >= 2 and rounds[0] and rounds[-1]:
            change = 100.0 * (rounds[-1] - rounds[0]) / rounds[0]
            entry["rounds_p50_us"] = {"first": rounds[0], "last": rounds[-1], "change_pct": round(change, 1)}
            if abs(change) >= DRIFT_WARN_PCT and abs(rounds[-1] - rounds[0]) >= DRIFT_MIN_ABS_US:
                reasons.append(f"{name}: TTLB p50 first round {rounds[0]} µs → last round {rounds[-1]} µs")
        evidence[name] = entry
    if reasons:
        return result(
            "drift",
            WARN,
            f"The target changed during the measurement ({'; '.join(reasons)}): something else was "
            "going on (caches, GC, other load). Use rounds to spread it over the arms, or rerun.",
            evidence,
        )
    if not judged:
        return result(
            "drift", PASS, f"Not judged: every arm measured fewer than {DRIFT_MIN_SECONDS} seconds."
        )
    return result(
        "drift", PASS, f"First and second half of each window agree within {DRIFT_WARN_PCT:.0f}%.", evidence
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
    for name, arm in arms.items():
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
        return result("syn_retransmit", PASS, "No TCP connect took 0.9 s or longer.")
    parts = [
        f"{name}: {e['slow_connects']} of {e['connections']} connects ≥ 0.9 s ({e['near_1s']} near 1 s, "
        f"{e['near_3s']} near 3 s)"
        for name, e in evidence.items()
    ]
    return result(
        "syn_retransmit",
        WARN,
        f"{'; '.join(parts)}. Connects of about 1 s and 3 s are SYN retransmissions: the server's accept "
        "backlog (listen queue) overflowed and the kernel dropped SYNs. Those requests measure the queue, "
        "not TLS — the '> 1000 ms' tail. Raise the listen backlog (net.core.somaxconn, the server's "
        "backlog) or add workers, or use fewer users.",
        evidence,
    )


def check_redirect(config: dict, arms: dict[str, dict]) -> dict:
    hops = {name: arm["redirects"] for name, arm in arms.items() if arm.get("redirects")}
    unfollowed = {
        name: {c: n for c, n in arm["status_codes"].items() if c in ("301", "302", "303", "307", "308")}
        for name, arm in arms.items()
    }
    unfollowed = {name: codes for name, codes in unfollowed.items() if codes}
    if unfollowed:
        parts = [
            f"{name}: " + ", ".join(f"{c}×{n}" for c, n in codes.items())
            for name, codes in unfollowed.items()
        ]
        return result(
            "redirect",
            FAIL,
            f"Redirects were measured instead of the page ({'; '.join(parts)}). Measure the final URL, or "
            "let Tollgate resolve redirects before measuring.",
            {"unfollowed": unfollowed},
        )
    if hops:
        parts = []
        for name, chain in hops.items():
            parts.append(f"{name}: " + ", ".join(f"{h['from']} → {h['to']} ({h['status']})" for h in chain))
        return result(
            "redirect",
            WARN,
            f"Redirects were resolved once before measuring and the final URLs measured "
            f"({'; '.join(parts)}). Real clients pay for the redirect too.",
            {"redirects": hops},
        )
    return result("redirect", PASS, "No redirects: the URLs given were measured.")


def check_auth(config: dict, arms: dict[str, dict]) -> dict:
    auth = config.get("auth") or {}
    demanded = {
        name: {c: n for c, n in arm["status_codes"].items() if c in AUTH_STATUSES}
        for name, arm in arms.items()
    }
    demanded = {name: codes for name, codes in demanded.items() if codes}
    if demanded:
        parts = [
            f"{name}: " + ", ".join(f"{c}×{n}" for c, n in codes.items()) for name, codes in demanded.items()
        ]
        if auth:
            whose = f" of {auth['user']}" if auth.get("user") else ""
            why = f"the {auth.get('type')} credentials{whose} were rejected"
        else:
            why = "the server wants credentials and none were configured"
        return result(
            "auth",
            FAIL,
            f"Authentication failed ({'; '.join(parts)}): {why}. These are thousands of fast refusals, not "
            "the page: set Basic or bearer credentials (sent pre-emptively, no 401 round trip).",
            {"demanded": demanded, "configured": auth.get("type")},
        )
    if auth:
        return result(
            "auth",
            PASS,
            f"{auth['type'].capitalize()} credentials were sent pre-emptively with every request and "
            "never refused.",
            {"configured": auth["type"]},
        )
    return result("auth", PASS, "No authentication configured, and the server asked for none.")


def check_tls_sessions(arms: dict[str, dict]) -> dict:
    evidence = {}
    problems = []
    status = PASS
    new = arms.get("tls_new")
    if new and new.get("connections_opened"):
        evidence["tls_new"] = {"reused": new["tls_sessions_reused"], "connections": new["connections_opened"]}
        if new["tls_sessions_reused"]:
            status = FAIL
            problems.append(
                f"tls_new resumed {new['tls_sessions_reused']} sessions (it must do full handshakes)"
            )
    resumed = arms.get("tls_resumed")
    if resumed and resumed.get("connections_opened"):
        share = resumed["tls_sessions_reused"] / resumed["connections_opened"]
        evidence["tls_resumed"] = {
            "reused": resumed["tls_sessions_reused"],
            "connections": resumed["connections_opened"],
        }
        if share < RESUMPTION_MIN_SHARE:
            status = FAIL if status == FAIL else WARN
            problems.append(
                f"tls_resumed resumed only {100 * share:.0f}% of its connections: the server does not keep "
                "sessions (no ticket key or session cache), so that arm measured full handshakes"
            )
    if problems:
        return result("tls_sessions", status, "; ".join(problems) + ".", evidence)
    if not evidence:
        return result("tls_sessions", PASS, "No arm opened TLS connections per request.")
    said = []
    if "tls_new" in evidence:
        said.append(
            f"tls_new did a full handshake on each of its {evidence['tls_new']['connections']} connections"
        )
    if "tls_resumed" in evidence:
        e = evidence["tls_resumed"]
        said.append(f"tls_resumed resumed {e['reused']} of {e['connections']}")
    return result("tls_sessions", PASS, "; ".join(said) + ".", evidence)


def check_all(config: dict, arms: dict[str, dict], tls_info: dict | None = None) -> list[dict]:
    if not arms:
        return []
    checks = [
        check_status_codes(config, arms),
        check_errors(arms),
        check_content_length(arms),
        check_generator(config, arms),
        check_schedule(config, arms),
        check_sample_size(arms),
        check_drift(arms),
        check_syn_retransmit(arms),
        check_redirect(config, arms),
        check_auth(config, arms),
        check_tls_sessions(arms),
    ]
    return [check for check in checks if check is not None]
