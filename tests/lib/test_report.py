"""Pure report math with hand-checked numbers (no database)."""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from portal.lib import hdr, report


def encoded(values: list[int]) -> str:
    h = hdr.new_histogram()
    for v in values:
        h.record_value(v)
    return h.encode().decode("ascii")


def arm(name: str, values: list[int], rps: float) -> dict:
    return {
        "arm": name,
        "url": f"http://h/{name}",
        "requests": len(values),
        "failures": 0,
        "duration_s": 10.0,
        "rps": rps,
        "hist": {"ttfb_us": encoded([v // 2 for v in values]), "ttlb_us": encoded(values)},
        "status_codes": {"200": len(values)},
        "response_bytes_min": 1024,
        "response_bytes_max": 1024,
    }


def test_summary_percentiles_are_exact_below_2048_us():
    # HDR with 3 significant digits is exact for values < 2048.
    s = hdr.summary(HdrHistogram.decode(encoded(list(range(1, 1001)))))
    assert (s["p50"], s["p90"], s["p95"], s["p99"], s["min"], s["max"]) == (500, 900, 950, 990, 1, 1000)
    assert s["mean"] == 500.5
    assert s["count"] == 1000


def test_summary_of_nothing_is_none():
    assert hdr.summary(None) is None
    assert hdr.summary(hdr.new_histogram()) is None


def test_merge_is_exact():
    merged = hdr.merge([encoded([100, 200]), None, encoded([300, 400])])
    assert merged.get_total_count() == 4
    assert hdr.summary(merged)["p50"] == 200


def test_deltas_against_plain():
    plain = arm("plain", [400] * 50 + [600] * 50, rps=1000.0)
    tls = arm("tls", [500] * 50 + [700] * 50, rps=900.0)
    data = report.build_report({"id": "x"}, [plain, tls])
    assert data["schema"] == "tollgate.report/1"
    assert data["arms"]["plain"]["ttlb_us"]["p50"] == 400
    assert data["arms"]["tls"]["ttlb_us"]["p50"] == 500
    delta = data["deltas"]["tls"]
    assert delta["vs"] == "plain"
    assert delta["ttlb_us"]["p50"] == {"delta": 100, "pct": 25.0}
    assert delta["ttlb_us"]["p95"] == {"delta": 100, "pct": 16.7}  # 700 vs 600
    assert delta["ttfb_us"]["p50"] == {"delta": 50, "pct": 25.0}
    assert delta["rps_pct"] == -10.0
    assert "plain" not in data["deltas"]


def test_no_plain_arm_means_no_deltas():
    data = report.build_report({"id": "x"}, [arm("tls", [500], rps=1.0)])
    assert data["deltas"] == {}
    assert data["arms"]["tls"]["connect_us"] is None


def test_histogram_overlay_bins_cover_all_counts():
    overlay = report.histogram_overlay([arm("plain", [100, 150, 1000], 1.0), arm("tls", [5000, 20000], 1.0)])
    edges = overlay["edges_us"]
    assert edges[0] <= 100 and edges[-1] >= 20000
    assert all(len(row) == len(edges) - 1 for row in overlay["counts"].values())
    assert sum(overlay["counts"]["plain"]) == 3 and sum(overlay["counts"]["tls"]) == 2
    # 1000 µs lands in the bin whose range contains it.
    nonzero = [k for k, c in enumerate(overlay["counts"]["plain"]) if c]
    assert any(edges[k] <= 1000 < edges[k + 1] for k in nonzero)
