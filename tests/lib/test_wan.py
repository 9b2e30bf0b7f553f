"""The WAN projection's arithmetic, with hand-counted round trips (no database)."""

from __future__ import annotations

import pytest

from portal.lib.report import report
from portal.lib.stats import wan
from tests.lib.test_report import arm


def section(p50_us: int, *, connections: int = 0, reused: int = 0, body: int = 1024) -> dict:
    return {
        "ttlb_us": {"p50": p50_us, "count": 100},
        "connections_opened": connections,
        "tls_sessions_reused": reused,
        "response_bytes": {"min": body, "max": body},
    }


def test_rtts_parse_sort_and_refuse_nonsense():
    assert wan.parse_rtts("200, 2,20,80") == [2.0, 20.0, 80.0, 200.0]
    assert wan.parse_rtts("") == [2.0, 20.0, 80.0, 200.0]
    assert wan.parse_rtts([5, "10"]) == [5.0, 10.0]
    assert wan.parse_rtts("[]") == [2.0, 20.0, 80.0, 200.0]
    for bad in (",", " , ", "x", "-1", "5000", ",".join(["1"] * 3 + [str(i) for i in range(2, 10)])):
        with pytest.raises(ValueError):
            wan.parse_rtts(bad)


def test_slow_start_counts_doublings_beyond_the_initial_window():
    assert wan.slow_start_extra_round_trips(None) == 0
    assert wan.slow_start_extra_round_trips(14_600) == 0  # exactly 10 × 1460
    assert wan.slow_start_extra_round_trips(14_601) == 1  # 11 segments: 10, then 20 more
    assert wan.slow_start_extra_round_trips(30 * 1460) == 1
    assert wan.slow_start_extra_round_trips(31 * 1460) == 2  # 10 + 20 + 40


def test_round_trips_per_arm_and_protocol():
    tls12 = {"protocol": "TLSv1.2", "chain_bytes": 900}
    tls13 = {"protocol": "TLSv1.3", "chain_bytes": 900}
    assert wan.arm_model("plain", section(400), tls13)["round_trips"] == 1
    keepalive = wan.arm_model("tls", section(500), tls12)
    assert keepalive["round_trips"] == 1
    assert keepalive["first_request_extra_round_trips"] == 1 + 2  # TCP + TLS 1.2 full, paid once
    assert wan.arm_model("plain_new", section(600, connections=100), tls13)["round_trips"] == 2
    assert wan.arm_model("tls_new", section(2000, connections=100), tls13)["round_trips"] == 3
    assert wan.arm_model("tls_new", section(2000, connections=100), tls12)["round_trips"] == 4
    # Resumed half the time in TLS 1.2: 0.5 × 1 + 0.5 × 2 TLS round trips.
    half = wan.arm_model("tls_resumed", section(900, connections=100, reused=50), tls12)
    assert half["tls"] == 1.5 and half["round_trips"] == 3.5
    assert half["early_data"] is False


def test_an_unknown_protocol_is_said_to_be_assumed_not_passed_off_as_measured():
    # The TLS facts probe failed ({"error": …}): no protocol, no chain.
    model = wan.arm_model("tls_new", section(2000, connections=100), {"error": "timeout"})
    assert model["round_trips"] == 3 and model["protocol"] is None
    assert (
        model["protocol_source"].startswith("unknown")
        and "TLS 1.3 round trips assumed" in (model["protocol_source"])
    )
    assert (
        wan.arm_model("tls_new", section(2000, connections=100), {"protocol": "TLSv1.2"})["protocol_source"]
        == "measured"
    )
    assert wan.arm_model("plain_new", section(600, connections=100), None)["protocol_source"] is None


def test_a_chain_beyond_the_initial_window_costs_a_round_trip_on_full_handshakes_only():
    big = {"protocol": "TLSv1.3", "chain_bytes": 16_000}
    full = wan.arm_model("tls_new", section(3000, connections=10), big)
    assert full["window"] == 1 and full["round_trips"] == 4
    resumed = wan.arm_model("tls_resumed", section(1000, connections=10, reused=10), big)
    assert resumed["window"] == 0 and resumed["round_trips"] == 3
    # A variant's measured flight replaces chain_bytes + the assumed overhead.
    measured = wan.arm_model("tls_new@1.3", section(3000, connections=10), big, {"server_flight_bytes": 800})
    assert measured["window"] == 0 and measured["handshake_flight_source"].startswith("measured")


def test_a_large_response_on_a_new_connection_pays_slow_start():
    tls13 = {"protocol": "TLSv1.3", "chain_bytes": 900}
    model = wan.arm_model("tls_new", section(3000, connections=10, body=100_000), tls13)
    assert model["response_window"] == 2  # 69 segments: 10, then 20 + 40 in two more RTTs
    assert wan.arm_model("tls", section(3000, body=100_000), tls13)["response_window"] == 0


def test_projection_rows_add_round_trips_times_rtt():
    arms = {"plain": section(400), "tls_new": section(2000, connections=100)}
    rows = wan.project(arms, {"protocol": "TLSv1.3", "chain_bytes": 800}, [20.0, 200.0])
    by = {(r["rtt_ms"], r["arm"]): r for r in rows}
    assert by[(20.0, "plain")]["projected_ttlb_ms"] == pytest.approx(0.4 + 20)
    assert by[(200.0, "tls_new")]["projected_ttlb_ms"] == pytest.approx(2.0 + 3 * 200)
    assert by[(20.0, "tls_new")]["variant"] is None
    assert by[(20.0, "tls_new")]["model"]["measured_ttlb_count"] == 100  # the p50's sample count
    assert set(by[(20.0, "tls_new")]) == {
        "rtt_ms",
        "arm",
        "variant",
        "projected_ttlb_ms",
        "round_trips",
        "model",
    }


def test_report_carries_wan_at_the_default_rtts_with_its_model():
    data = report.build_report(
        {"id": "x"},
        [arm("plain", [400] * 100, 1000.0), arm("tls", [500] * 100, 900.0)],
        {"protocol": "TLSv1.3", "chain_bytes": 800},
    )
    assert sorted({r["rtt_ms"] for r in data["wan"]}) == [2.0, 20.0, 80.0, 200.0]
    assert {r["arm"] for r in data["wan"]} == {"plain", "tls"}
    assert data["wan_model"]["initcwnd_bytes"] == 14_600
    assert data["wan_model"]["chain_bytes"] == 800
    assert any("early data" in a.lower() or "0-rtt" in a.lower() for a in data["wan_model"]["assumptions"])
    custom = report.build_report(
        {"id": "x", "config": {"wan_rtt_ms": [50]}}, [arm("plain", [400] * 10, 10.0)]
    )
    assert [r["rtt_ms"] for r in custom["wan"]] == [50.0]
    assert data["matrix"] == [] and data["advice"] == []


def test_a_hybrid_key_share_that_pushes_a_flight_past_the_initial_window_costs_a_round_trip():
    # A server flight just under the initial window with X25519 (a large chain), over it with the
    # hybrid's 1,088-byte ciphertext: one more round trip, for the hybrid's variant only.
    classic = {"protocol": "TLSv1.3", "server_flight_bytes": 14_000, "client_flight_bytes": 230}
    hybrid = {"protocol": "TLSv1.3", "server_flight_bytes": 15_070, "client_flight_bytes": 1_400}
    measured = section(2000, connections=100)
    a = wan.arm_model("tls_new@x25519", measured, {}, classic)
    b = wan.arm_model("tls_new@mlkem", measured, {}, hybrid)
    assert (a["window"], b["window"]) == (0, 1) and b["round_trips"] - a["round_trips"] == 1
    # The ClientHello's own window: the hybrid's ~1.4 kB fits; a 20 kB one would not.
    assert a["client_window"] == b["client_window"] == 0 and b["client_flight_bytes"] == 1_400
    huge = wan.arm_model("tls_new@big", measured, {}, {**classic, "client_flight_bytes": 20_000})
    assert huge["client_window"] == 1 and huge["round_trips"] == a["round_trips"] + 1
    assumptions = " ".join(wan.model_inputs([20.0], {})["assumptions"])
    assert "X25519MLKEM768" in assumptions and "HelloRetryRequest" in assumptions
