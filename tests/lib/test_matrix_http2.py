"""The TLS matrix's HTTP/2 arms (issue 25, item 4): ``h2_new`` repeated over every dimension and
``h2`` for the protocol, their report entries against their HTTP/1.1 twins, the advice that says
which arm it is about, and the WAN projection that counts them as their twins (no database)."""

from __future__ import annotations

import pytest

from portal.lib.report import report
from portal.lib.runs.protocol import EngineConfig
from portal.lib.stats import wan
from portal.lib.tls import matrix
from tests.lib.test_matrix import probe, rows


def test_h2_new_is_repeated_over_every_dimension_and_h2_for_the_protocol_only():
    h2_new = matrix.variants(["protocol", "group"], "h2_new")
    assert len(h2_new) == 2 * 3 and matrix.variant_name(h2_new[1], "h2_new") == "h2_new@1.2+p256"
    assert matrix.variants(["protocol", "group"], "h2_new") == matrix.variants(["protocol", "group"])
    h2 = matrix.variants(["protocol", "cert", "resumption"], "h2")
    assert [matrix.variant_name(v, "h2") for v in h2] == ["h2@1.2", "h2@1.3"]
    assert matrix.variants(["cert"], "h2") == [] and matrix.variants(["protocol"], "h2c") == []
    # Every sub-arm of every repeated arm the run has, for time limits and quotas (h2c has none).
    arms = ["plain", "tls", "tls_new", "h2", "h2_new", "h2c"]
    assert matrix.variant_count(["protocol", "cert"], arms) == 2 + 6 + 2 + 6
    everything = matrix.variants(list(matrix.DIMENSIONS), "h2_new")
    assert max(len(matrix.variant_name(v, "h2_new")) for v in everything) <= matrix.MAX_NAME
    assert matrix.base_arm("h2_new@1.3+x25519") == "h2_new" and matrix.is_http2("h2@1.2")
    assert not matrix.is_http2("tls_new@1.3") and not matrix.is_http2("h2c")


def test_an_http2_sub_arm_has_its_http11_twin():
    assert matrix.http1_twin("h2_new@1.3+x25519+ecdsa") == "tls_new@1.3+x25519+ecdsa"
    assert matrix.http1_twin("h2@1.2") == "tls@1.2"
    assert matrix.http1_twin("h2_new") is None and matrix.http1_twin("tls_new@1.2") is None


def test_the_matrix_needs_tls_new_or_h2_new():
    arms = [{"name": "plain", "url": "http://h/"}, {"name": "h2_new", "url": "https://h/"}]
    config = EngineConfig.from_dict(
        {"arms": arms, "tls_matrix": ["protocol"], "warmup_s": 1, "duration_s": 1}
    )
    assert config.arm_count() == 2 + 2
    h2 = [{"name": "h2", "url": "https://h/"}]
    with pytest.raises(ValueError, match="tls_matrix needs the tls_new or the h2_new arm"):
        EngineConfig.from_dict({"arms": h2, "tls_matrix": ["protocol"]})
    assert matrix.needs_arm_error(["tls_new"]) is None and matrix.needs_arm_error(["plain", "h2"])


def h2_probe(name: str, **variant) -> dict:
    entry = probe(name, **variant)
    entry["negotiated"] = {"protocol": {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}[variant["protocol"]]}
    entry["negotiated"]["alpn"] = "h2" if matrix.is_http2(name) else "http/1.1"
    return entry


def test_http2_sub_arms_have_their_own_entries_costs_twin_costs_advice_and_wan_rows():
    probes = [
        h2_probe("tls_new@1.2", protocol="tls1.2"),
        h2_probe("tls_new@1.3", protocol="tls1.3"),
        h2_probe("h2_new@1.2", protocol="tls1.2"),
        h2_probe("h2_new@1.3", protocol="tls1.3"),
        probe("h2@1.2", "refused", "the server does not offer HTTP/2 over ALPN", protocol="tls1.2"),
        h2_probe("h2@1.3", protocol="tls1.3"),
    ]
    arms = [
        rows("plain", 200),
        rows("plain_new", 300),
        rows("tls_new@1.2", 1500),
        rows("tls_new@1.3", 2000),
        rows("h2_new@1.2", 1700),
        rows("h2_new@1.3", 2100),
        rows("h2@1.3", 260),
    ]
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3", "chain_bytes": 700}, None, probes)
    entries = {m["arm"]: m for m in data["matrix"]}
    assert list(entries) == [p["name"] for p in probes]
    h2_new = entries["h2_new@1.3"]
    assert (
        h2_new["base_arm"] == "h2_new"
        and h2_new["requests"] == 200
        and h2_new["ttlb_us"]["p50"] == pytest.approx(2100, abs=3)
    )
    assert h2_new["negotiated"]["alpn"] == "h2"
    # Its own cost against the new plain connection, and HTTP/2's against HTTP/1.1 on the same variant.
    assert h2_new["cost"]["base"] == "plain_new" and h2_new["cost"]["delta"] == pytest.approx(1800, abs=3)
    assert h2_new["http1_twin"] == "tls_new@1.3"
    assert h2_new["http1_cost"]["name"] == "h2_new_vs_tls_new" and h2_new["http1_cost"][
        "delta"
    ] == pytest.approx(100, abs=3)
    keepalive = entries["h2@1.3"]
    assert keepalive["cost"]["base"] == "plain" and keepalive["http1_twin"] == "tls@1.3"
    assert keepalive["http1_cost"] is None  # tls@1.3 did not run
    refused = entries["h2@1.2"]
    assert refused["status"] == "refused" and refused["requests"] is None and "ALPN" in refused["detail"]
    assert entries["tls_new@1.3"]["http1_twin"] is None and entries["tls_new@1.3"]["http1_cost"] is None

    # One protocol item per repeated arm, each saying which arm it is about, each with TLS 1.2's
    # extra round trip on full handshakes (HTTP/2 changes nothing in the handshake's round trips).
    protocol = {a["arms"][0]: a for a in data["advice"] if a.get("dimension") == "protocol"}
    assert set(protocol) == {"tls_new@1.3", "h2_new@1.3"}
    assert "(h2_new: HTTP/2, a new TLS connection per request)" in protocol["h2_new@1.3"]["title"]
    assert "h2_new" not in protocol["tls_new@1.3"]["title"]
    assert (
        protocol["h2_new@1.3"]["saving_us"] == pytest.approx(400, abs=3)
        and protocol["h2_new@1.3"]["extra_round_trips"] == 1
    )
    assert len({a["title"] for a in data["advice"]}) == len(data["advice"])

    # The WAN projection counts an HTTP/2 sub-arm as its HTTP/1.1 twin, in its own probe's protocol.
    by_arm = {r["arm"]: r for r in data["wan"] if r["rtt_ms"] == 20.0}
    assert by_arm["h2_new@1.2"]["round_trips"] == by_arm["tls_new@1.2"]["round_trips"] == 4
    assert by_arm["h2_new@1.3"]["round_trips"] == by_arm["tls_new@1.3"]["round_trips"] == 3
    assert by_arm["h2_new@1.2"]["model"]["protocol"] == "TLSv1.2"
    assert by_arm["h2@1.3"]["round_trips"] == 1 and by_arm["h2@1.3"]["variant"]["protocol"] == "tls1.3"
    assert any("HTTP/2 sub-arms as their HTTP/1.1 twins" in a for a in data["wan_model"]["assumptions"])


def test_wan_counts_an_http2_sub_arm_as_its_twin():
    section = {"ttlb_us": {"p50": 2000, "count": 100}, "connections_opened": 100, "tls_sessions_reused": 0}
    negotiated = {"protocol": "TLSv1.2", "server_flight_bytes": 20_000, "client_flight_bytes": 300}
    h2 = wan.arm_model("h2_new@1.2+rsa", section, {}, negotiated)
    assert h2 == wan.arm_model("tls_new@1.2+rsa", section, {}, negotiated)
    assert h2["round_trips"] == 1 + 1 + 2 + 1  # request, TCP, TLS 1.2 full, the flight's slow start
