"""The report (schema ``tollgate.report/1``), computed from stored histograms by pure functions.

Input is plain data (see ``portal.runs.reporting`` for the adapter from models), so this module is
tested without a database. Documented in docs/report-schema.md.
"""

from __future__ import annotations

import statistics
from collections import Counter

from portal.lib import hdr

SCHEMA = "tollgate.report/1"
# Percentile levels of the percentile curve (p0 … p99.99), spaced for a 1/(1−p) axis.
CURVE_LEVELS = (0, 10, 25, 50, 75, 90, 95, 97.5, 99, 99.5, 99.9, 99.95, 99.99, 100)
LATENCY_METRICS = ("ttfb_us", "ttlb_us", "connect_us", "tls_handshake_us")
BASE_ARM = "plain"


def merge_rounds(rows: list[dict]) -> list[dict]:
    """Rows of one run (one per arm and round) → one merged row per arm, in first-seen order.

    Histograms are merged exactly (HDR addition), counts summed, rps recomputed over the summed
    measured time, per-second series concatenated (each point tagged with its round), and a
    ``rounds`` list keeps each round's own figures for the bootstrap over rounds.
    """
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["arm"], []).append(row)
    merged_rows = []
    for group in groups.values():
        group = sorted(group, key=lambda r: r.get("round", 0))
        first = group[0]
        if len(group) == 1:
            merged = dict(first)
        else:
            merged = dict(first)
            hist = {}
            for metric in LATENCY_METRICS:
                h = hdr.merge(r.get("hist", {}).get(metric) for r in group)
                hist[metric] = hdr.encode(h) if h is not None and h.get_total_count() else None
            merged["hist"] = hist
            for key in (
                "requests",
                "failures",
                "warmup_requests",
                "connections_opened",
                "tls_sessions_reused",
            ):
                merged[key] = sum(r.get(key) or 0 for r in group)
            merged["late_requests"] = sum(r.get("late_requests") or 0 for r in group)
            merged["max_schedule_lag_us"] = max(r.get("max_schedule_lag_us") or 0 for r in group)
            merged["duration_s"] = sum(r["duration_s"] for r in group)
            merged["rps"] = merged["requests"] / merged["duration_s"] if merged["duration_s"] else 0.0
            merged["complete"] = all(r.get("complete", True) for r in group)
            codes: Counter[str] = Counter()
            for r in group:
                codes.update(r.get("status_codes") or {})
            merged["status_codes"] = dict(sorted(codes.items()))
            mins = [r.get("response_bytes_min") for r in group if r.get("response_bytes_min") is not None]
            maxs = [r.get("response_bytes_max") for r in group if r.get("response_bytes_max") is not None]
            merged["response_bytes_min"] = min(mins) if mins else None
            merged["response_bytes_max"] = max(maxs) if maxs else None
            sizes: dict[str, set] = {}
            for r in group:
                for path, values in (r.get("sizes_by_url") or {}).items():
                    sizes.setdefault(path, set()).update(values)
            merged["sizes_by_url"] = {path: sorted(values) for path, values in sizes.items()}
            errors: dict[str, dict] = {}
            for r in group:
                for kind, entry in (r.get("errors") or {}).items():
                    into = errors.setdefault(kind, {"count": 0, "samples": []})
                    into["count"] += entry["count"]
                    into["samples"] = (
                        into["samples"] + [s for s in entry["samples"] if s not in into["samples"]]
                    )[:3]
            merged["errors"] = errors
        merged["series"] = [
            {**point, "round": r.get("round", 0)} for r in group for point in (r.get("series") or [])
        ]
        merged["rounds"] = [round_figures(r) for r in group]
        merged["server_cpu_ms_per_req"] = _cpu_per_req(group)
        merged["generator_probe_cpu_ms_per_req"] = _cpu_per_req(group, "generator_cpu")
        merged["server_cpu_windows"] = [
            {"round": r.get("round", 0), **((r.get("server_cpu") or {}).get("server_cpu") or {})}
            for r in group
            if (r.get("server_cpu") or {}).get("server_cpu")
        ]
        merged["generator_cpu_windows"] = [
            (r.get("server_cpu") or {}).get("generator_cpu")
            for r in group
            if (r.get("server_cpu") or {}).get("generator_cpu")
        ]
        merged_rows.append(merged)
    return merged_rows


def round_figures(row: dict) -> dict:
    """One round's own figures (for CIs over rounds and the drift check)."""
    ttlb = _p50_p95(hdr.decode(row.get("hist", {}).get("ttlb_us")))
    ttfb = _p50_p95(hdr.decode(row.get("hist", {}).get("ttfb_us")))
    return {
        "round": row.get("round", 0),
        "requests": row["requests"],
        "rps": round(row["rps"], 3),
        "ttlb_p50_us": ttlb["p50"] if ttlb else None,
        "ttlb_p95_us": ttlb["p95"] if ttlb else None,
        "ttfb_p50_us": ttfb["p50"] if ttfb else None,
        "server_cpu_ms_per_req": _cpu_per_req([row]),
    }


def _p50_p95(hist) -> dict | None:
    if hist is None or hist.get_total_count() == 0:
        return None
    at = hdr.values_at_percentiles(hist, (50, 95))
    return {"p50": at[50], "p95": at[95]}


def _cpu_per_req(rows: list[dict], key: str = "server_cpu") -> float | None:
    """Server CPU-ms per request over rows (rounds): total CPU over total requests."""
    windows = [(row.get("server_cpu") or {}).get(key) for row in rows]
    if not windows or any(w is None for w in windows):
        return None
    requests = sum(row["requests"] for row in rows)
    return round(1000.0 * sum(w["cpu_s"] for w in windows) / requests, 6) if requests else None


def _spread(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": round(statistics.median(values), 1), "max": round(max(values), 1)}


def arm_section(arm: dict) -> dict:
    """One arm's entry of the report. ``arm['hist']`` maps metric name to encoded histogram."""
    hist = arm.get("hist", {})
    series = arm.get("series") or []
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
        requested_url=arm.get("requested_url") or arm["url"],
        targets=arm.get("targets") or [],
        redirects=arm.get("redirects") or [],
        sizes_by_path=arm.get("sizes_by_url") or {},
        late_requests=arm.get("late_requests", 0),
        max_schedule_lag_us=arm.get("max_schedule_lag_us", 0),
        generator={
            "cpu_pct": _spread([p.get("gen_cpu_pct") for p in series]),
            "loop_lag_ms": _spread([p.get("loop_lag_ms") for p in series]),
            "runq_wait_pct": _spread([p.get("gen_runq_pct") for p in series]),
        },
        rounds=arm.get("rounds") or [],
        server_cpu_ms_per_req=arm.get("server_cpu_ms_per_req"),
        series=series,
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


def _cpu_by_arm(merged: list[dict], windows_key: str, per_req_key: str, timeline: bool = False) -> dict:
    """A sampled process's CPU per arm, its rounds' windows summed (``workers.probes.ssh.cpu_in_window``)."""
    out = {}
    for arm in merged:
        windows = arm.get(windows_key) or []
        if not windows:
            continue
        entry = {
            "cpu_s": round(sum(w["cpu_s"] for w in windows), 6),
            "cpu_ms_per_req": arm.get(per_req_key),
            "requests": arm["requests"],
            "samples": sum(w.get("samples", 0) for w in windows),
            "process": windows[0].get("process"),
        }
        if timeline:
            entry["host_cpu_pct"] = [w.get("host_cpu_pct") for w in windows]
            entry["timeline"] = [point for w in windows for point in w.get("timeline", [])]
            entry["cpu_pct_ma15"] = [value for w in windows for value in w.get("cpu_pct_ma15", [])]
        out[arm["arm"]] = entry
    return out


def probes_section(probes: dict | None, merged: list[dict]) -> dict | None:
    """``probes`` of the report: what the server probes found, per host and per arm."""
    server_cpu = _cpu_by_arm(merged, "server_cpu_windows", "server_cpu_ms_per_req", timeline=True)
    generator_cpu = _cpu_by_arm(merged, "generator_cpu_windows", "generator_probe_cpu_ms_per_req")
    probes = probes or {}
    if not probes and not server_cpu and not generator_cpu:
        return None
    return {
        "server": probes.get("server"),
        "host_key": probes.get("host_key"),
        "openssl_speed": probes.get("openssl_speed") or {},
        "cryptsetup": probes.get("cryptsetup"),
        "server_cpu": server_cpu,
        "generator_cpu": generator_cpu,
        "errors": probes.get("errors") or [],
    }


def build_report(
    run: dict, arms: list[dict], tls_info: dict | None = None, probes: dict | None = None
) -> dict:
    """The whole report. ``arms``: stored rows (one per arm and round) in run order; missing arms
    (failed or not reached) are absent. Costs and validity are derived here, on every read."""
    from portal.lib import costs, validity

    merged = merge_rounds(arms)
    arm_sections = {arm["arm"]: arm_section(arm) for arm in merged}
    cost_inputs = {
        name: {
            "ttlb_us": section["ttlb_us"],
            "ttfb_us": section["ttfb_us"],
            "rps": section["rps"],
            "series": section["series"],
            "rounds": section["rounds"],
            "server_cpu_ms_per_req": section["server_cpu_ms_per_req"],
        }
        for name, section in arm_sections.items()
    }
    cost_list = costs.compute_costs(cost_inputs)
    for section in arm_sections.values():
        section["breakdown"] = breakdown(section)
    return {
        "schema": SCHEMA,
        "run": run,
        "headline": headline(cost_list),
        "arms": arm_sections,
        "deltas": deltas_vs(arm_sections),
        "costs": cost_list,
        "validity": validity.check_all(run.get("config") or {}, arm_sections, tls_info or {}),
        "tls_info": tls_info or None,
        "probes": probes_section(probes, merged),
        "projection": projection_inputs(arm_sections),
    }


def projection_inputs(arms: dict[str, dict]) -> dict | None:
    """What the cost projection needs: the extra server CPU-ms per request TLS adds on a warm
    connection (``tls`` − ``plain``) and on a new one (``tls_new`` − ``plain_new``; without the
    ``plain_new`` control, ``tls_new`` − ``plain``, which also charges the TCP setup to TLS — said
    in ``new_base``). None without server CPU for ``plain``, ``tls`` and ``tls_new``."""

    def cpu(name: str) -> float | None:
        return (arms.get(name) or {}).get("server_cpu_ms_per_req")

    if cpu("plain") is None or cpu("tls") is None or cpu("tls_new") is None:
        return None
    new_base = "plain_new" if cpu("plain_new") is not None else "plain"
    return {
        "keepalive_ms_per_req": round(cpu("tls") - cpu("plain"), 6),
        "new_ms_per_req": round(cpu("tls_new") - cpu(new_base), 6),
        "new_base": new_base,
        "formula": "extra cores = peak req/s × ((1 − f) × Δkeep-alive + f × Δnew) / 1000 ms",
    }


def project_cores(projection: dict, peak_rps: float, new_share: float) -> float:
    """Extra server cores TLS needs at ``peak_rps`` with ``new_share`` (0–1) of the requests on new
    connections. The page computes the same in static/js/run.js as the user types."""
    if not 0.0 <= new_share <= 1.0 or peak_rps < 0:
        raise ValueError("peak_rps must be ≥ 0 and new_share within 0–1")
    per_req_ms = (1.0 - new_share) * projection["keepalive_ms_per_req"] + new_share * projection[
        "new_ms_per_req"
    ]
    return peak_rps * per_req_ms / 1000.0


def histogram_overlay(arms: list[dict], metric: str = "ttlb_us") -> dict:
    """Log-binned counts of one metric for every arm (rounds merged), for the overlay chart."""
    encoded: dict[str, list] = {}
    for arm in arms:
        encoded.setdefault(arm["arm"], []).append(arm.get("hist", {}).get(metric))
    hists = {
        name: (hdr.decode(items[0]) if len(items) == 1 else hdr.merge(items))
        for name, items in encoded.items()
    }
    return hdr.log_bins(hists)


def config_hash(config: dict) -> str:
    """A short fingerprint of what was asked (engine config without secrets), to spot equal setups."""
    import hashlib
    import json

    public = {k: v for k, v in config.items() if k not in ("secrets", "headers")}
    digest = hashlib.sha256(json.dumps(public, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:16]


def percentile_curve(hist) -> list[list[float]] | None:
    """[[percentile, value_us], …] at CURVE_LEVELS: the whole distribution, tail included."""
    if hist is None or hist.get_total_count() == 0:
        return None
    at = hdr.values_at_percentiles(hist, [level for level in CURVE_LEVELS if level not in (0, 100)])
    out = []
    for level in CURVE_LEVELS:
        if level == 0:
            value = hist.get_min_value()
        elif level == 100:
            value = hist.get_max_value()
        else:
            value = at[level]
        out.append([level, value])
    return out


def breakdown(section: dict) -> dict:
    """Where a request's time goes, from the means (means add up; medians do not):
    connect + handshake + waiting for the first byte + transfer = TTLB (for arms that open a
    connection per request; keep-alive arms have no connect or handshake in the window)."""

    def mean(metric: str) -> float:
        summary = section.get(metric)
        return summary["mean"] if summary else 0.0

    connect, handshake = mean("connect_us"), mean("tls_handshake_us")
    ttfb, ttlb = mean("ttfb_us"), mean("ttlb_us")
    return {
        "connect_us": round(connect, 1),
        "tls_handshake_us": round(handshake, 1),
        "wait_us": round(max(0.0, ttfb - connect - handshake), 1),
        "transfer_us": round(max(0.0, ttlb - ttfb), 1),
        "ttlb_mean_us": round(ttlb, 1),
    }


COST_WORDS = {
    "keepalive_tls": "TLS on warm (keep-alive) connections",
    "handshake": "a full TLS handshake per request",
    "resumption_saving": "session resumption",
}


def _ms(us: float) -> str:
    return f"{us / 1000:+.2f} ms"


def headline(costs: list[dict]) -> str | None:
    """The answer in one sentence, from the TTLB-median costs with their intervals and verdicts."""
    parts = []
    for cost in costs:
        if cost["metric"] != "ttlb_p50_us":
            continue
        pct = f", {cost['delta_pct']:+.0f}%" if cost["delta_pct"] is not None else ""
        ci = ""
        if cost["ci95"]:
            ci = f", 95% CI {cost['ci95'][0] / 1000:+.2f} … {cost['ci95'][1] / 1000:+.2f} ms"
        if cost["name"] == "resumption_saving":
            saved = cost["delta"] / 1000
            parts.append(
                f"session resumption saves {saved:.2f} ms per new connection ({cost['verdict']}{ci})"
            )
        else:
            if cost["delta"] >= 0:
                what = f"{COST_WORDS[cost['name']]} adds {_ms(cost['delta'])} median time to last byte"
            else:
                what = (
                    f"{COST_WORDS[cost['name']]} changes the median time to last byte by {_ms(cost['delta'])}"
                )
            cpu = next(
                (c for c in costs if c["name"] == cost["name"] and c["metric"] == "server_cpu_ms_per_req"),
                None,
            )
            if cpu is not None:
                what += f" and {cpu['delta']:+.3f} server CPU-ms per request"
            parts.append(f"{what} ({cost['verdict']}{pct}{ci})")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."
