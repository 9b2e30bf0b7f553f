"""The WAN projection counts QUIC's round trips (issue 34, item 5): a new QUIC connection pays 1 before
the request where TCP + TLS 1.3 pay 2, a resumed one 1, an accepted 0-RTT one 0, a warm one none; a
refused 0-RTT connection pays its round trip; a server flight past the anti-amplification limit pays
one more; the model says what it assumes."""

from __future__ import annotations

import pytest

from portal.lib.stats import wan


def section(p50_us: int = 2000, quic: dict | None = None, **extra) -> dict:
    return {
        "ttlb_us": {"p50": p50_us, "count": 300},
        "connections_opened": 300,
        "tls_sessions_reused": 0,
        "response_bytes": {"min": 1024, "max": 1024},
        "quic": quic,
        **extra,
    }


def facts(**changes) -> dict:
    base = {
        "connections": 300,
        "resumed": 0,
        "early_data": {"accepted": 0, "refused": 0, "no_ticket": 0},
        "first_flight_bytes_max": 1252,
        "handshake_bytes_received": 300 * 3000,
    }
    return base | changes


TLS13 = {"protocol": "TLSv1.3", "chain_bytes": 1500}


def test_a_new_quic_connection_pays_one_round_trip_before_the_request_where_tcp_and_tls_pay_two():
    h3_new = wan.arm_model("h3_new", section(quic=facts()), TLS13)
    tls_new = wan.arm_model("tls_new", section(), TLS13)
    assert (h3_new["tcp"], h3_new["tls"], h3_new["quic"], h3_new["round_trips"]) == (0, 0, 1, 2)
    assert tls_new["round_trips"] == 3 and h3_new["round_trips"] < tls_new["round_trips"]
    assert h3_new["amplification_limit_bytes"] == 3 * 1252 and h3_new["window"] == 0


def test_resumed_0rtt_and_warm():
    resumed = wan.arm_model("h3_resumed", section(quic=facts(resumed=300), tls_sessions_reused=300), TLS13)
    assert resumed["quic"] == 1 and resumed["round_trips"] == 2 and resumed["resumed_share"] == 1
    accepted = facts(resumed=300, early_data={"accepted": 300, "refused": 0, "no_ticket": 0})
    zero = wan.arm_model("h3_0rtt", section(quic=accepted), TLS13)
    assert zero["quic"] == 0 and zero["round_trips"] == 1 and zero["early_data"] == 1
    half = facts(resumed=300, early_data={"accepted": 150, "refused": 150, "no_ticket": 0})
    assert wan.arm_model("h3_0rtt", section(quic=half), TLS13)["round_trips"] == pytest.approx(1.5)
    warm = wan.arm_model("h3", section(quic=facts(connections=0), connections_opened=2), TLS13)
    assert warm["round_trips"] == 1 and warm["first_request_extra_round_trips"] == 1


def test_a_server_flight_past_the_anti_amplification_limit_pays_a_round_trip_per_3x():
    assert wan.amplification_round_trips(3 * 1200, 1200) == 0
    assert wan.amplification_round_trips(3 * 1200 + 1, 1200) == 1
    assert (
        wan.amplification_round_trips(7 * 1200, 1200) == 2 and wan.amplification_round_trips(None, 1200) == 0
    )
    big = wan.arm_model("h3_new", section(quic=facts(handshake_bytes_received=300 * 5000)), TLS13)
    assert big["window"] == 1 and big["round_trips"] == 3 and big["handshake_flight_bytes"] == 5000
    # A resumed handshake sends no certificate: it is not charged.
    resumed = facts(resumed=300, handshake_bytes_received=300 * 5000)
    assert wan.arm_model("h3_resumed", section(quic=resumed, tls_sessions_reused=300), TLS13)["window"] == 0


def test_the_projection_and_its_stated_assumptions():
    rows = wan.project({"h3_new": section(2000, facts()), "tls_new": section(3000)}, TLS13, [100.0])
    projected = {r["arm"]: r["projected_ttlb_ms"] for r in rows}
    assert projected == {"h3_new": 2 + 2 * 100, "tls_new": 3 + 3 * 100}
    model = wan.model_inputs([100.0], TLS13)
    assert model["round_trips"]["quic_full"] == 1 and model["round_trips"]["quic_0rtt_accepted"] == 0
    assert any("HTTP/3 (QUIC) has no TCP connect" in a for a in model["assumptions"])
