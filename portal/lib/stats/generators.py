"""Distributed runs: merging the Locust workers' figures exactly, and the report's ``generators``.

Pure functions on plain data, used on both sides: the engine's master (``workers.engine.distribution.master``)
merges its workers' recorder results into one arm result, the report lists each worker with its share.
Histograms are added (HDR addition), counts summed; a percentile is never averaged.
Documented in docs/engine-protocol.md (messages) and docs/report-schema.md (``generators``).
"""

from __future__ import annotations

from collections import Counter

from portal.lib.stats import hdr

HIST_METRICS = ("ttfb_us", "ttlb_us", "connect_us", "tls_handshake_us")
SUMMED = (
    "requests",
    "failures",
    "connections_opened",
    "connections_reopened",
    "tls_sessions_reused",
    "late_requests",
    "unwindowed_requests",
)
MAX_ERROR_SAMPLES = 3


def merged_hist(encoded: list[str | None]) -> str | None:
    """The exact sum of encoded HDR histograms, encoded; None when nothing was recorded."""
    merged = hdr.merge(encoded)
    return hdr.encode(merged) if merged is not None and merged.get_total_count() else None


def _errors(parts: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for part in parts:
        for kind, entry in (part.get("errors") or {}).items():
            mine = out.setdefault(kind, {"count": 0, "samples": []})
            mine["count"] += entry["count"]
            for sample in entry.get("samples", []):
                if len(mine["samples"]) < MAX_ERROR_SAMPLES and sample not in mine["samples"]:
                    mine["samples"].append(sample)
    return out


def _by_url(parts: list[dict]) -> tuple[dict, dict]:
    sizes: dict[str, set] = {}
    content: dict[str, dict[str, set]] = {}
    for part in parts:
        for url, values in (part.get("sizes_by_url") or {}).items():
            sizes.setdefault(url, set()).update(values)
        for url, headers in (part.get("content_by_url") or {}).items():
            mine = content.setdefault(url, {})
            for key, values in headers.items():
                mine.setdefault(key, set()).update(values)
    return (
        {url: sorted(values) for url, values in sizes.items()},
        {url: {key: sorted(v) for key, v in headers.items()} for url, headers in content.items()},
    )


def merge_results(parts: list[dict], measured_s: float) -> dict:
    """Several recorders' ``result()`` (one per Locust worker, or a lost worker's summed seconds) →
    one result of the same shape, over the master's measured window ``measured_s``."""
    out: dict = {key: sum(part.get(key) or 0 for part in parts) for key in SUMMED}
    out["max_schedule_lag_us"] = max((part.get("max_schedule_lag_us") or 0 for part in parts), default=0)
    out["measured_s"] = round(measured_s, 6)
    out["rps"] = round(out["requests"] / measured_s, 3) if measured_s > 0 else 0.0
    out["hist"] = {
        metric: merged_hist([(part.get("hist") or {}).get(metric) for part in parts])
        for metric in HIST_METRICS
    }
    codes: Counter[str] = Counter()
    for part in parts:
        codes.update(part.get("status_codes") or {})
    out["status_codes"] = dict(sorted(codes.items(), key=lambda item: int(item[0])))
    lows = [
        part["response_bytes"]["min"]
        for part in parts
        if (part.get("response_bytes") or {}).get("min") is not None
    ]
    highs = [
        part["response_bytes"]["max"]
        for part in parts
        if (part.get("response_bytes") or {}).get("max") is not None
    ]
    out["response_bytes"] = {"min": min(lows, default=None), "max": max(highs, default=None)}
    out["sizes_by_url"], out["content_by_url"] = _by_url(parts)
    out["errors"] = _errors(parts)
    out["http2"] = merge_http2([part.get("http2") for part in parts])
    out["quic"] = merge_quic([part.get("quic") for part in parts])
    return out


def merge_http2(parts: list[dict | None]) -> dict | None:
    """Several recorders' HTTP/2 facts (``ArmRecorder.http2``) as one: counts added, the server's
    lowest stream limit, the highest peak. None when no part has any."""
    found = [part for part in parts if part]
    if not found:
        return None
    limits = [part["peer_max_streams"] for part in found if part.get("peer_max_streams") is not None]
    out: dict = {"alpn": Counter(), "goaway": Counter()}
    for part in found:
        out["alpn"].update(part.get("alpn") or {})
        out["goaway"].update(part.get("goaway") or {})
    return {
        "alpn": dict(out["alpn"]),
        "peer_max_streams": min(limits, default=None),
        "streams_peak": max(part.get("streams_peak") or 0 for part in found),
        "goaway": dict(out["goaway"]),
    }


# An HTTP/3 arm's ``quic`` (docs/engine-protocol.md): counters added, counts by name merged, the
# largest first flight kept (``merge_quic``).
QUIC_SUMMED = (
    "connections",
    "resumed",
    "retry",
    "version_negotiation",
    "datagrams_sent",
    "datagrams_received",
    "bytes_sent",
    "bytes_received",
    "packets_lost",
    "pto_count",
    "handshake_bytes_sent",
    "handshake_bytes_received",
    "streams_reset",
)
QUIC_COUNTS = ("versions", "alpn", "groups", "ciphers", "early_data", "closed_by_server")
QUIC_MAX = ("first_flight_bytes_max", "first_flight_datagrams_max")


def merge_quic(parts: list[dict | None]) -> dict | None:
    """Several recorders' ``quic`` as one — a distributed arm's workers (the engine, through
    ``merge_results``) or an arm's rounds (``rounds``): counters added, dict counts merged, the
    largest first flight kept; the discovery is the arm's (the same on every part). None when no
    part has any (not an HTTP/3 arm)."""
    found = [part for part in parts if part]
    if not found:
        return None
    out: dict = {key: found[0].get(key) for key in ("port", "discovered_by", "alt_svc")}
    for key in QUIC_SUMMED:
        out[key] = sum(part.get(key) or 0 for part in found)
    for key in QUIC_COUNTS:
        merged: Counter = Counter()
        for part in found:
            merged.update(part.get(key) or {})
        out[key] = dict(merged)
    for key in QUIC_MAX:
        out[key] = max(part.get(key) or 0 for part in found)
    return out


def seconds_total(seconds: list[dict]) -> dict:
    """A worker's per-second buckets summed into a partial result: what a lost worker had reported
    before it went (requests, failures, TTLB and TTFB; its other breakdowns went with it)."""
    return {
        "requests": sum(s["requests"] for s in seconds),
        "failures": sum(s["failures"] for s in seconds),
        "hist": {
            metric: merged_hist([(s.get("hist") or {}).get(metric) for s in seconds])
            for metric in ("ttlb_us", "ttfb_us")
        },
    }


def merge_second(buckets: list[dict]) -> dict:
    """The workers' buckets of one measured second → one series point (percentiles of the summed
    histograms)."""
    point: dict = {
        "requests": sum(b["requests"] for b in buckets),
        "failures": sum(b["failures"] for b in buckets),
    }
    for metric, keys in (
        ("ttlb_us", ("p50_us", "p95_us", "p99_us")),
        ("ttfb_us", ("ttfb_p50_us", "ttfb_p95_us")),
    ):
        merged = hdr.merge((b.get("hist") or {}).get(metric) for b in buckets)
        counted = merged is not None and merged.get_total_count()
        for key in keys:
            percentile = float(key.split("p")[-1].split("_")[0])
            point[key] = merged.get_value_at_percentile(percentile) if counted else None
    return point


def report_generators(rows: list[dict]) -> list[dict] | None:
    """The report's ``generators``: one entry per Locust worker over the run's stored arms (rounds
    summed), ``{"id", "host", "arms": {arm: {"requests", "cpu_s"}}, "lost_at"}``. None for a run with
    one generator process (no Locust workers)."""
    entries: dict[str, dict] = {}
    for row in rows:
        for worker in row.get("generators") or []:
            entry = entries.setdefault(
                worker["id"],
                {
                    "id": worker["id"],
                    "host": worker.get("host"),
                    "arms": {},
                    "lost_at": None,
                    "lost_reason": None,
                },
            )
            arm = entry["arms"].setdefault(row["arm"], {"requests": 0, "cpu_s": 0.0})
            arm["requests"] += worker.get("requests") or 0
            arm["cpu_s"] = round(arm["cpu_s"] + (worker.get("cpu_s") or 0.0), 6)
            if worker.get("lost_at") is not None and entry["lost_at"] is None:
                entry["lost_at"] = worker["lost_at"]
                entry["lost_reason"] = worker.get("lost_reason")
    return list(entries.values()) or None
