"""The TLS matrix's variants and names, its report entries and the advice ranked from them."""

from __future__ import annotations

import pytest

from portal.lib import matrix, report
from portal.lib.protocol import EngineConfig
from tests.lib.test_report import arm


def test_dimensions_parse_in_canonical_order_and_refuse_unknown_ones():
    assert matrix.parse_dimensions("resumption, protocol") == ["protocol", "resumption"]
    assert matrix.parse_dimensions(None) == []
    with pytest.raises(ValueError, match="curve"):
        matrix.parse_dimensions("protocol,curve")


def test_variants_are_the_cross_product_with_short_names_that_fit_the_column():
    variants = matrix.variants(["protocol", "cert"])
    assert len(variants) == 6  # RSA, ECDSA and Ed25519 under each protocol
    assert variants[0] == {"protocol": "tls1.2", "group": None, "cert": "rsa", "resumption": None}
    assert matrix.variant_name(variants[0]) == "tls_new@1.2+rsa"
    everything = matrix.variants(list(matrix.DIMENSIONS))
    assert len(everything) == matrix.variant_count(list(matrix.DIMENSIONS)) == 54
    longest = max(len(matrix.variant_name(v)) for v in everything)
    assert longest <= matrix.MAX_NAME
    assert matrix.base_arm("tls_new@1.3+x25519") == "tls_new" and matrix.base_arm("tls") == "tls"


def test_engine_config_plans_time_for_the_sub_arms_and_needs_tls_new():
    arms = [{"name": "plain", "url": "http://h/"}, {"name": "tls_new", "url": "https://h/"}]
    config = EngineConfig.from_dict(
        {"arms": arms, "tls_matrix": ["protocol"], "warmup_s": 1, "duration_s": 1}
    )
    assert config.arm_count() == 4 and config.planned_s() == 8
    with pytest.raises(ValueError, match="tls_new"):
        EngineConfig.from_dict({"arms": arms[:1], "tls_matrix": ["protocol"]})
    with pytest.raises(ValueError, match="unknown matrix"):
        EngineConfig.from_dict({"arms": arms, "tls_matrix": ["colour"]})


def probe(name: str, status: str = "measured", detail: str = "", **variant) -> dict:
    full = dict.fromkeys(matrix.DIMENSIONS) | variant
    return {
        "name": name,
        "variant": full,
        "status": status,
        "detail": detail,
        "negotiated": {"protocol": "TLSv1.2"},
    }


def rows(name: str, value: int, cpu: float | None = None) -> dict:
    row = arm(name, [value] * 200, 100.0)
    row["connections_opened"] = 200
    row["series"] = [{"p50_us": value + (i % 3), "p95_us": value, "requests": 20} for i in range(10)]
    if cpu is not None:
        row["server_cpu"] = {"server_cpu": {"cpu_s": cpu * 200 / 1000.0, "samples": 2}}
    return row


def test_matrix_entries_and_advice_ranked_by_measured_saving():
    probes = [
        probe("tls_new@1.2+rsa", protocol="tls1.2", cert="rsa"),
        probe("tls_new@1.2+ecdsa", protocol="tls1.2", cert="ecdsa"),
        probe("tls_new@1.3+rsa", "refused", "asked for a RSA certificate", protocol="tls1.3", cert="rsa"),
        probe("tls_new@1.3+ecdsa", protocol="tls1.3", cert="ecdsa"),
    ]
    arms = [
        rows("plain_new", 300, 0.05),
        rows("tls_new", 1500, 0.6),
        rows("tls_new@1.2+rsa", 1900, 0.9),
        rows("tls_new@1.2+ecdsa", 1100, 0.3),
        rows("tls_new@1.3+ecdsa", 1000, 0.25),
    ]
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3", "chain_bytes": 700}, None, probes)
    entries = {m["arm"]: m for m in data["matrix"]}
    assert [m["arm"] for m in data["matrix"]] == [p["name"] for p in probes]
    refused = entries["tls_new@1.3+rsa"]
    assert refused["status"] == "refused" and refused["requests"] is None and "RSA" in refused["detail"]
    rsa = entries["tls_new@1.2+rsa"]
    assert rsa["variant"] == {"protocol": "tls1.2", "group": None, "cert_key_type": "rsa", "resumption": None}
    assert rsa["requests"] == 200 and rsa["ttlb_us"]["p50"] == 1900
    # How many handshakes resumed under load (not only in the probe) is in the entry.
    assert rsa["connections_opened"] == 200 and rsa["tls_sessions_reused"] == 0
    assert refused["connections_opened"] is None
    assert rsa["server_cpu_ms_per_req"] == pytest.approx(0.9)
    assert rsa["cost"]["base"] == "plain_new" and rsa["cost"]["delta"] == 1600
    # Sub-arms are arms of the report like any other, with their own WAN rows.
    assert "tls_new@1.2+ecdsa" in data["arms"]
    wan_variant = [r for r in data["wan"] if r["arm"] == "tls_new@1.2+ecdsa"][0]
    assert wan_variant["variant"]["cert_key_type"] == "ecdsa" and wan_variant["round_trips"] == 4

    advice = data["advice"]
    assert [a["saving_us"] for a in advice] == sorted((a["saving_us"] for a in advice), reverse=True)
    cert = next(a for a in advice if a.get("dimension") == "cert")
    assert cert["title"].startswith("ECDSA certificate instead of RSA")
    assert cert["saving_us"] == 800 and cert["saving_server_cpu_ms"] == pytest.approx(0.6)
    assert cert["ci95"] is not None and "tls_new@1.2+rsa" in cert["evidence"]
    protocol = next(a for a in advice if a.get("dimension") == "protocol")
    assert protocol["arms"] == ["tls_new@1.2+ecdsa", "tls_new@1.3+ecdsa"] and protocol["saving_us"] == 100
    # Nothing about resumption or groups: they were not measured.
    assert not any(a.get("dimension") in ("group", "resumption") for a in advice)
    assert not any("resumption" in a["title"].lower() for a in advice)


def test_the_request_budget_counts_the_sub_arms():
    from portal.lib import quotas

    config = {
        "arms": ["plain_new", "tls_new"],
        "users": 1,
        "arrival_rate": 10,
        "warmup_s": 1,
        "duration_s": 4,
    }
    assert quotas.planned_requests(config) == 10 * 5 * 2
    assert quotas.planned_requests({**config, "tls_matrix": ["protocol", "cert"]}) == 10 * 5 * (2 + 6)


def test_keep_alive_tls_is_repeated_for_the_protocol_only():
    variants = matrix.variants(["protocol", "cert", "resumption"], "tls")
    assert [matrix.variant_name(v, "tls") for v in variants] == ["tls@1.2", "tls@1.3"]
    assert matrix.variants(["cert"], "tls") == [] and matrix.variants(["protocol"], "plain") == []
    assert matrix.variant_count(["protocol", "cert"], ["plain", "tls", {"name": "tls_new"}]) == 2 + 6
    assert matrix.variant_count(["protocol", "cert"]) == 6  # tls_new alone


def test_tls12_cheaper_next_to_the_server_is_advised_with_its_extra_round_trip():
    """On loopback TLS 1.2 can come out cheaper than 1.3; far away it costs a round trip more. The
    advice must not recommend the downgrade without saying where it stops paying."""
    full = [probe("tls_new@1.2", protocol="tls1.2"), probe("tls_new@1.3", protocol="tls1.3")]
    arms = [rows("plain_new", 300), rows("tls_new@1.2", 1500), rows("tls_new@1.3", 2000)]
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3", "chain_bytes": 700}, None, full)
    item = next(a for a in data["advice"] if a.get("dimension") == "protocol")
    assert item["arms"] == ["tls_new@1.3", "tls_new@1.2"]
    assert item["extra_round_trips"] == 1 and item["break_even_rtt_ms"] == 0.5
    assert "1 more round trip per new connection" in item["title"] and "0.5 ms RTT" in item["title"]
    assert "2 round trips" in item["evidence"]
    # Resumed, TLS 1.2 and 1.3 both take one round trip: no caveat.
    resumed = [
        probe("tls_new@1.2+ticket", protocol="tls1.2", resumption="ticket"),
        probe("tls_new@1.3+ticket", protocol="tls1.3", resumption="ticket"),
    ]
    arms = [rows("plain_new", 300), rows("tls_new@1.2+ticket", 900), rows("tls_new@1.3+ticket", 1100)]
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3", "chain_bytes": 700}, None, resumed)
    item = next(a for a in data["advice"] if a.get("dimension") == "protocol")
    assert item["arms"] == ["tls_new@1.3+ticket", "tls_new@1.2+ticket"]
    assert "extra_round_trips" not in item and "round trip" not in item["title"]
