"""The report (schema ``tollgate.report/1``), computed from stored histograms by pure functions.

Input is plain data (see ``portal.runs.reporting`` for the adapter from models), so this module is
tested without a database. Documented in docs/report-schema.md.
"""

from __future__ import annotations

from portal.lib import hdr

SCHEMA = "tollgate.report/1"
LATENCY_METRICS = ("ttfb_us", "ttlb_us", "connect_us", "tls_handshake_us")
BASE_ARM = "plain"


def arm_section(arm: dict) -> dict:
    """One arm's entry of the report. ``arm['hist']`` maps metric name to encoded histogram."""
    hist = arm.get("hist", {})
    section = {
        "url": arm["url"],
        "complete": arm.get("complete", True),
        "users": arm.get("users"),
        "warmup_s": arm.get("warmup_s"),
        "warmup_requests_excluded": arm.get("warmup_requests", 0),
        "requests": arm["requests"],
        "failures": arm["failures"],
        "duration_s": round(arm["duration_s"], 3),
        "rps": round(arm["rps"], 2),
    }
    for metric in LATENCY_METRICS:
        section[metric] = hdr.summary(hdr.decode(hist.get(metric)))
    section.update(
        status_codes=dict(arm.get("status_codes", {})),
        response_bytes={"min": arm.get("response_bytes_min"), "max": arm.get("response_bytes_max")},
        connections_opened=arm.get("connections_opened", 0),
        tls_sessions_reused=arm.get("tls_sessions_reused", 0),
        errors=arm.get("errors", {}),
        hdr={metric: hist.get(metric) or None for metric in LATENCY_METRICS},
    )
    return section


def pct(delta: float, base: float) -> float | None:
    return round(100.0 * delta / base, 1) if base else None


def deltas_vs(arms: dict[str, dict], base: str = BASE_ARM) -> dict[str, dict]:
    """Each arm minus the base arm: latency percentiles in µs and %, throughput in %."""
    if base not in arms:
        return {}
    ref = arms[base]
    out: dict[str, dict] = {}
    for name, section in arms.items():
        if name == base:
            continue
        entry: dict = {"vs": base}
        for metric in ("ttfb_us", "ttlb_us"):
            mine, theirs = section.get(metric), ref.get(metric)
            if not mine or not theirs:
                entry[metric] = None
                continue
            entry[metric] = {
                key: {"delta": mine[key] - theirs[key], "pct": pct(mine[key] - theirs[key], theirs[key])}
                for key in ("p50", "p95", "p99")
            }
        entry["rps_pct"] = pct(section["rps"] - ref["rps"], ref["rps"])
        out[name] = entry
    return out


def build_report(run: dict, arms: list[dict]) -> dict:
    """The whole report. ``arms`` in run order; missing arms (failed or not reached) are absent."""
    arm_sections = {arm["arm"]: arm_section(arm) for arm in arms}
    return {
        "schema": SCHEMA,
        "run": run,
        "arms": arm_sections,
        "deltas": deltas_vs(arm_sections),
    }


def histogram_overlay(arms: list[dict], metric: str = "ttlb_us") -> dict:
    """Log-binned counts of one metric for every arm, for the overlay chart."""
    return hdr.log_bins({arm["arm"]: hdr.decode(arm.get("hist", {}).get(metric)) for arm in arms})
