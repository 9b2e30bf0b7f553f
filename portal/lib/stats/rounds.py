"""Merging the rounds of a run: the stored rows (one per arm and round) → one row per arm.

Pure functions over plain data (the rows ``portal.runs.reporting`` reads from the models), used by
``portal.lib.report.report.build_report``. Documented in docs/report-schema.md.
"""

from __future__ import annotations

from collections import Counter

from portal.lib.stats import hdr
from portal.lib.stats.generators import merge_http2, merge_quic

LATENCY_METRICS = ("ttfb_us", "ttlb_us", "connect_us", "tls_handshake_us")
# Counts that add up over rounds.
SUMMED_COUNTS = (
    "requests",
    "failures",
    "warmup_requests",
    "unwindowed_requests",
    "connections_opened",
    "tls_sessions_reused",
    "late_requests",
)


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
        merged = dict(group[0]) if len(group) == 1 else _merge_measurements(group)
        merged.update(_per_round_fields(group))
        merged_rows.append(merged)
    return merged_rows


def _merge_measurements(group: list[dict]) -> dict:
    """Several rounds of one arm (sorted by round) → one row: the first round's row with its
    histograms, counts, status codes, body sizes and errors replaced by those of all rounds."""
    merged = dict(group[0])
    merged["hist"] = _merged_histograms(group)
    merged.update(_summed_counts(group))
    merged["status_codes"] = _merged_status_codes(group)
    merged.update(_merged_sizes(group))
    merged["errors"] = _merged_errors(group)
    merged["http2"] = merge_http2([r.get("http2") for r in group])
    merged["quic"] = merge_quic([r.get("quic") for r in group])
    merged["stopped"] = next((r["stopped"] for r in group if r.get("stopped")), "")
    return merged


def _merged_histograms(group: list[dict]) -> dict:
    hist = {}
    for metric in LATENCY_METRICS:
        h = hdr.merge(r.get("hist", {}).get(metric) for r in group)
        hist[metric] = hdr.encode(h) if h is not None and h.get_total_count() else None
    return hist


def _summed_counts(group: list[dict]) -> dict:
    """Counts summed, the worst schedule lag, and rps over the summed measured time."""
    out = {key: sum(r.get(key) or 0 for r in group) for key in SUMMED_COUNTS}
    out["max_schedule_lag_us"] = max(r.get("max_schedule_lag_us") or 0 for r in group)
    # Unknown (null) when any round was stored before the engine counted reopened connections.
    reopened = [r.get("connections_reopened") for r in group]
    out["connections_reopened"] = None if None in reopened else sum(reopened)
    out["duration_s"] = sum(r["duration_s"] for r in group)
    out["rps"] = out["requests"] / out["duration_s"] if out["duration_s"] else 0.0
    out["complete"] = all(r.get("complete", True) for r in group)
    return out


def _merged_status_codes(group: list[dict]) -> dict:
    codes: Counter[str] = Counter()
    for r in group:
        codes.update(r.get("status_codes") or {})
    return dict(sorted(codes.items()))


def _merged_sizes(group: list[dict]) -> dict:
    """The smallest and largest body, every body size and every Content-Type / Content-Encoding seen
    per path."""
    mins = [r.get("response_bytes_min") for r in group if r.get("response_bytes_min") is not None]
    maxs = [r.get("response_bytes_max") for r in group if r.get("response_bytes_max") is not None]
    sizes: dict[str, set] = {}
    for r in group:
        for path, values in (r.get("sizes_by_url") or {}).items():
            sizes.setdefault(path, set()).update(values)
    content: dict[str, dict[str, set]] = {}
    for r in group:
        for path, headers in (r.get("content_by_url") or {}).items():
            into = content.setdefault(path, {})
            for key, values in headers.items():
                into.setdefault(key, set()).update(values)
    return {
        "response_bytes_min": min(mins) if mins else None,
        "response_bytes_max": max(maxs) if maxs else None,
        "sizes_by_url": {path: sorted(values) for path, values in sizes.items()},
        "content_by_url": {
            path: {key: sorted(values) for key, values in headers.items()}
            for path, headers in content.items()
        },
    }


def _merged_errors(group: list[dict]) -> dict:
    """Error counts summed per kind, with up to three distinct samples."""
    errors: dict[str, dict] = {}
    for r in group:
        for kind, entry in (r.get("errors") or {}).items():
            into = errors.setdefault(kind, {"count": 0, "samples": []})
            into["count"] += entry["count"]
            into["samples"] = (into["samples"] + [s for s in entry["samples"] if s not in into["samples"]])[
                :3
            ]
    return errors


def _per_round_fields(group: list[dict]) -> dict:
    """What keeps each round apart: the series (points tagged with their round), each round's own
    figures, and the sampled CPU windows; plus CPU per request over all rounds."""
    return {
        "series": [{**point, "round": r.get("round", 0)} for r in group for point in (r.get("series") or [])],
        "rounds": [round_figures(r) for r in group],
        "server_cpu_ms_per_req": _cpu_per_req(group),
        "generator_probe_cpu_ms_per_req": _cpu_per_req(group, "generator_cpu"),
        "server_cpu_windows": [
            {"round": r.get("round", 0), **((r.get("server_cpu") or {}).get("server_cpu") or {})}
            for r in group
            if (r.get("server_cpu") or {}).get("server_cpu")
        ],
        "generator_cpu_windows": [
            (r.get("server_cpu") or {}).get("generator_cpu")
            for r in group
            if (r.get("server_cpu") or {}).get("generator_cpu")
        ],
    }


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
        "generator_probe_cpu_ms_per_req": _cpu_per_req([row], "generator_cpu"),
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
