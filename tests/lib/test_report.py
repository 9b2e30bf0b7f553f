"""Pure report math with hand-checked numbers (no database)."""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from portal.lib.report import charts, headline, report
from portal.lib.stats import hdr, projection, rounds


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
    overlay = charts.histogram_overlay([arm("plain", [100, 150, 1000], 1.0), arm("tls", [5000, 20000], 1.0)])
    edges = overlay["edges_us"]
    assert edges[0] <= 100 and edges[-1] >= 20000
    assert all(len(row) == len(edges) - 1 for row in overlay["counts"].values())
    assert sum(overlay["counts"]["plain"]) == 3 and sum(overlay["counts"]["tls"]) == 2
    # 1000 µs lands in the bin whose range contains it.
    nonzero = [k for k, c in enumerate(overlay["counts"]["plain"]) if c]
    assert any(edges[k] <= 1000 < edges[k + 1] for k in nonzero)


def test_percentile_curve_runs_from_min_to_max():
    curve = charts.percentile_curve(HdrHistogram.decode(encoded(list(range(1, 1001)))))
    as_dict = dict((level, value) for level, value in curve)
    assert as_dict[0] == 1 and as_dict[50] == 500 and as_dict[99] == 990 and as_dict[99.9] == 999
    assert as_dict[100] == 1000
    assert [level for level, _ in curve] == list(charts.CURVE_LEVELS)
    assert charts.percentile_curve(None) is None


def test_breakdown_uses_means_that_add_up():
    section = {
        "connect_us": {"mean": 100.0},
        "tls_handshake_us": {"mean": 900.0},
        "ttfb_us": {"mean": 1300.0},
        "ttlb_us": {"mean": 1500.0},
    }
    parts = report.breakdown(section)
    assert parts == {
        "connect_us": 100.0,
        "tls_handshake_us": 900.0,
        "wait_us": 300.0,
        "transfer_us": 200.0,
        "ttlb_mean_us": 1500.0,
    }
    assert parts["connect_us"] + parts["tls_handshake_us"] + parts["wait_us"] + parts["transfer_us"] == 1500.0


def test_headline_sentence_from_costs():
    costs = [
        {
            "name": "keepalive_tls",
            "metric": "ttlb_p50_us",
            "delta": 400,
            "delta_pct": 9.2,
            "ci95": [300, 510],
            "verdict": "noticeable",
        },
        {
            "name": "keepalive_tls",
            "metric": "rps",
            "delta": -10,
            "delta_pct": -1.0,
            "ci95": None,
            "verdict": "negligible",
        },
        {
            "name": "handshake",
            "metric": "ttlb_p50_us",
            "delta": 1200,
            "delta_pct": 130.0,
            "ci95": None,
            "verdict": "significant",
        },
        {
            "name": "resumption_saving",
            "metric": "ttlb_p50_us",
            "delta": 700,
            "delta_pct": 40.0,
            "ci95": None,
            "verdict": "significant",
        },
    ]
    assert headline.headline(costs) == (
        "TLS on warm (keep-alive) connections adds +0.40 ms median time to last byte (noticeable, +9%, "
        "95% CI +0.30 … +0.51 ms); a full TLS handshake per request: +1.20 ms median time to last byte "
        "(unconfirmed, +130%); session resumption: -0.70 ms per new connection (unconfirmed). "
        "Unconfirmed: too few seconds/rounds for an interval — measure ≥ 5 s per arm or 3 rounds."
    )
    assert headline.headline([]) is None


def cost(name: str, delta: int, **extra) -> dict:
    base = {
        "name": name,
        "metric": "ttlb_p50_us",
        "delta": delta,
        "delta_pct": 10.0,
        "ci95": [delta - 50, delta + 50],
        "verdict": "noticeable",
        "not_judged": None,
        "warnings": [],
    }
    return base | extra


def test_headline_of_the_default_three_arms_names_the_new_connection_once_with_a_hint():
    text = headline.headline([cost("keepalive_tls", 400), cost("new_connection_tls", 2600, delta_pct=650.0)])
    assert text == (
        "TLS on warm (keep-alive) connections adds +0.40 ms median time to last byte (noticeable, +10%, "
        "95% CI +0.35 … +0.45 ms); a new TLS connection per request (TCP connect included) adds +2.60 ms "
        "median time to last byte (noticeable, +650%, 95% CI +2.55 … +2.65 ms). Adding the plain_new arm "
        "isolates the handshake from the TCP connect."
    )
    # With plain_new the handshake alone is the answer: no new-connection clause, no hint.
    five = headline.headline([cost("new_connection_tls", 2600), cost("handshake", 1200)])
    assert "new TLS connection" not in five and "plain_new" not in five
    assert five.lower().count("a full tls handshake per request adds +1.20 ms") == 1


def test_headline_states_no_cost_that_was_not_judged_and_carries_warnings():
    costs = [
        cost(
            "keepalive_tls", 400, warnings=[{"check": "drift", "reason": "tls: TTLB p50 1000 → 1320 (+32%)"}]
        ),
        cost(
            "resumption_saving",
            -1860,
            verdict=None,
            not_judged="tls_resumed did not resume — 0 of 4,210 handshakes resumed (tls_sessions)",
        ),
    ]
    text = headline.headline(costs)
    assert "(noticeable, +10%, 95% CI +0.35 … +0.45 ms; warnings: drift)" in text
    assert (
        "session resumption: not judged — tls_resumed did not resume — 0 of 4,210 handshakes resumed "
        "(tls_sessions)" in text
    )
    assert "1.86" not in text and "saves" not in text


def test_headline_says_a_short_run_has_no_interval_and_no_verdict():
    # A verdict stored with no interval (a summary from before) is not said either.
    text = headline.headline([cost("keepalive_tls", 400, ci95=None)])
    assert text == (
        "TLS on warm (keep-alive) connections: +0.40 ms median time to last byte (unconfirmed, +10%). "
        "Unconfirmed: too few seconds/rounds for an interval — measure ≥ 5 s per arm or 3 rounds."
    )
    assert "noticeable" not in text


def test_rounds_merge_exactly():
    one = arm("tls", [100, 200, 300], rps=3.0) | {"round": 0, "duration_s": 1.0, "series": [{"p50_us": 200}]}
    two = arm("tls", [400, 500], rps=2.0) | {"round": 1, "duration_s": 1.0, "series": [{"p50_us": 450}]}
    (merged,) = rounds.merge_rounds([one, two])
    assert merged["requests"] == 5 and merged["duration_s"] == 2.0 and merged["rps"] == 2.5
    assert hdr.summary(hdr.decode(merged["hist"]["ttlb_us"]))["p50"] == 300
    assert [p["round"] for p in merged["series"]] == [0, 1]
    assert [r["ttlb_p50_us"] for r in merged["rounds"]] == [200, 400]
    assert merged["status_codes"] == {"200": 5}


def test_reopened_connections_add_up_over_rounds_and_stay_unknown_if_a_round_did_not_count_them():
    one = arm("tls", [100, 200], rps=2.0) | {"round": 0, "duration_s": 1.0, "connections_reopened": 3}
    two = arm("tls", [300, 400], rps=2.0) | {"round": 1, "duration_s": 1.0, "connections_reopened": 4}
    (merged,) = rounds.merge_rounds([one, two])
    assert merged["connections_reopened"] == 7
    old = arm("tls", [300, 400], rps=2.0) | {"round": 1, "duration_s": 1.0}
    (merged,) = rounds.merge_rounds([one, old])
    assert merged["connections_reopened"] is None
    assert report.arm_section(merged)["connections_reopened"] is None


def test_a_run_measured_nothing_when_its_merged_arms_are_all_invalid():
    def round_of(name: str, n: int, code: str, number: int) -> dict:
        return arm(name, [500] * n, rps=n / 10) | {"round": number, "status_codes": {code: n}}

    # Each arm's rounds are judged merged, as the report judges them: one good round of two is no
    # majority of failures.
    rows = [round_of("plain", 100, "404", 0), round_of("tls", 100, "404", 0)]
    assert report.measured_nothing({}, rows) == "no arm measured the page: 404 × 100 on every arm"
    rows += [round_of("plain", 100, "404", 1), round_of("tls", 100, "200", 1)]
    assert report.measured_nothing({}, rows) is None
    built = report.build_report({"config": {}}, rows)
    assert list(built["run"]["invalid_arms"]) == ["plain"]  # the same verdict on each arm


def test_config_hash_ignores_secrets_and_key_order():
    a = report.config_hash({"users": 2, "arms": [], "secrets": "token-1"})
    b = report.config_hash({"arms": [], "users": 2, "secrets": "token-2"})
    assert a == b and len(a) == 16
    assert report.config_hash({"arms": [], "users": 3}) != a


def test_projection_inputs_and_cores_by_hand():
    arms = {
        "plain": {"server_cpu_ms_per_req": 0.020},
        "tls": {"server_cpu_ms_per_req": 0.030},
        "plain_new": {"server_cpu_ms_per_req": 0.050},
        "tls_new": {"server_cpu_ms_per_req": 0.650},
    }
    p = projection.projection_inputs(arms)
    assert p["keepalive_ms_per_req"] == 0.01 and p["new_ms_per_req"] == 0.6 and p["new_base"] == "plain_new"
    # 5000 req/s, 10% new: 5000 × (0.9 × 0.01 + 0.1 × 0.6) / 1000 = 5000 × 0.069 / 1000 = 0.345 cores.
    assert abs(projection.project_cores(p, 5000, 0.10) - 0.345) < 1e-12
    assert projection.project_cores(p, 5000, 0.0) == 5000 * 0.01 / 1000
    assert abs(projection.project_cores(p, 2000, 1.0) - 1.2) < 1e-12
    # Without the plain_new control the new-connection delta is against plain, and says so.
    del arms["plain_new"]
    p = projection.projection_inputs(arms)
    assert p["new_base"] == "plain" and p["new_ms_per_req"] == 0.63
    # Without server CPU there is nothing to project.
    arms["tls"] = {"server_cpu_ms_per_req": None}
    assert projection.projection_inputs(arms) is None


def test_project_cores_rejects_impossible_inputs():
    import pytest

    p = {"keepalive_ms_per_req": 0.01, "new_ms_per_req": 0.6}
    for rps, share in ((-1, 0.1), (100, 1.5), (100, -0.1)):
        with pytest.raises(ValueError):
            projection.project_cores(p, rps, share)


def test_headline_adds_server_cpu_when_probed():
    costs = [
        {"name": "handshake", "metric": "ttlb_p50_us", "delta": 1200, "delta_pct": 130.0, "ci95": None,
         "verdict": "significant"},
        {"name": "handshake", "metric": "server_cpu_ms_per_req", "delta": 0.6, "delta_pct": 1200.0,
         "ci95": None, "verdict": "significant"},
    ]  # fmt: skip
    assert headline.headline(costs) == (
        "A full TLS handshake per request: +1.20 ms median time to last byte and +0.600 server CPU-ms "
        "per request (unconfirmed, +130%). "
        "Unconfirmed: too few seconds/rounds for an interval — measure ≥ 5 s per arm or 3 rounds."
    )
    costs[0]["ci95"] = [1000, 1400]
    assert headline.headline(costs) == (
        "A full TLS handshake per request adds +1.20 ms median time to last byte and +0.600 server CPU-ms "
        "per request (significant, +130%, 95% CI +1.00 … +1.40 ms)."
    )


def test_headline_of_a_negative_cost_reads_as_a_change():
    costs = [{"name": "keepalive_tls", "metric": "ttlb_p50_us", "delta": -10, "delta_pct": -2.0,
              "ci95": [-30, 5], "verdict": "negligible"}]  # fmt: skip
    assert headline.headline(costs) == (
        "TLS on warm (keep-alive) connections changes the median time to last byte by -0.01 ms "
        "(negligible, -2%, 95% CI -0.03 … +0.01 ms)."
    )


def test_answers_outside_the_windows_add_up_over_rounds_beside_the_warm_up():
    one = arm("tls", [100, 200], rps=2.0) | {"round": 0, "warmup_requests": 9, "unwindowed_requests": 2}
    two = arm("tls", [300, 400], rps=2.0) | {"round": 1, "warmup_requests": 8, "unwindowed_requests": 3}
    (merged,) = rounds.merge_rounds([one, two])
    section = report.arm_section(merged)
    assert (section["warmup_requests_excluded"], section["unwindowed_requests_excluded"]) == (17, 5)
    assert section["requests"] == 4
