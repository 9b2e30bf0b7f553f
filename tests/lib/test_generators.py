"""Merging Locust workers' recorder results: exact HDR addition, summed counts
(portal.lib.stats.generators)."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from portal.lib.stats import generators


def _hist(values: list[int]) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    for value in values:
        h.record_value(value)
    return h.encode().decode("ascii")


def _part(values: list[int], status: str, error: str | None = None) -> dict:
    return {
        "requests": len(values),
        "failures": 1 if error else 0,
        "hist": {
            "ttlb_us": _hist(values),
            "ttfb_us": _hist(values),
            "connect_us": None,
            "tls_handshake_us": None,
        },
        "status_codes": {status: len(values)},
        "response_bytes": {"min": 100, "max": 100 + len(values)},
        "sizes_by_url": {"/1k": [1024]},
        "content_by_url": {"/1k": {"content_type": ["text/plain"], "content_encoding": [""]}},
        "errors": {error: {"count": 1, "samples": ["x"]}} if error else {},
        "connections_opened": 2,
        "connections_reopened": 1,
        "tls_sessions_reused": 0,
        "late_requests": 1,
        "max_schedule_lag_us": len(values),
    }


def test_merge_is_the_histogram_of_all_values_never_an_average():
    rng = random.Random(7)
    fast = [rng.randint(100, 200) for _ in range(900)]
    slow = [rng.randint(5_000, 9_000) for _ in range(100)]
    merged = generators.merge_results([_part(fast, "200"), _part(slow, "503", "timeout")], 2.0)
    everything = HdrHistogram.decode(_hist(fast + slow))
    result = HdrHistogram.decode(merged["hist"]["ttlb_us"])
    for p in (50, 90, 95, 99, 99.9):
        assert result.get_value_at_percentile(p) == everything.get_value_at_percentile(p)
    # p95 of the whole sits in the slow worker's range; the mean of the two p95s would not.
    assert result.get_value_at_percentile(95) >= 5_000
    assert merged["requests"] == 1000 and merged["rps"] == 500.0 and merged["failures"] == 1
    assert merged["status_codes"] == {"200": 900, "503": 100}
    assert merged["response_bytes"] == {"min": 100, "max": 1000}
    assert merged["errors"] == {"timeout": {"count": 1, "samples": ["x"]}}
    assert merged["hist"]["connect_us"] is None and merged["max_schedule_lag_us"] == 900
    assert merged["connections_opened"] == 4 and merged["late_requests"] == 2
    assert merged["connections_reopened"] == 2


def test_a_lost_workers_seconds_and_the_report_entries():
    seconds = [
        {"t_s": 1, "requests": 3, "failures": 0, "hist": {"ttlb_us": _hist([10, 20, 30]), "ttfb_us": None}},
        {"t_s": 2, "requests": 2, "failures": 1, "hist": {"ttlb_us": _hist([40, 50]), "ttfb_us": None}},
    ]
    share = generators.seconds_total(seconds)
    assert share["requests"] == 5 and share["failures"] == 1
    assert HdrHistogram.decode(share["hist"]["ttlb_us"]).get_total_count() == 5
    point = generators.merge_second(seconds)
    assert point["requests"] == 5 and point["p50_us"] == 30 and point["ttfb_p50_us"] is None
    rows = [
        {
            "arm": "plain",
            "generators": [{"id": "a:1", "host": "a", "requests": 5, "cpu_s": 0.5, "lost_at": None}],
        },
        {
            "arm": "plain",
            "generators": [{"id": "a:1", "host": "a", "requests": 7, "cpu_s": 0.25, "lost_at": 9.5}],
        },
        {"arm": "tls", "generators": []},
    ]
    entries = generators.report_generators(rows)
    assert entries == [
        {
            "id": "a:1",
            "host": "a",
            "arms": {"plain": {"requests": 12, "cpu_s": 0.75}},
            "lost_at": 9.5,
            "lost_reason": None,
        }
    ]
    assert generators.report_generators([{"arm": "plain"}]) is None
