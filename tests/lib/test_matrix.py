"""The TLS matrix's variants and names, its report entries and the advice ranked from them."""

from __future__ import annotations

import pytest

from portal.lib.report import report
from portal.lib.runs.protocol import EngineConfig
from portal.lib.tls import matrix
from tests.lib.test_report import arm


def test_dimensions_parse_in_canonical_order_and_refuse_unknown_ones():
    assert matrix.parse_dimensions("resumption, protocol") == ["protocol", "resumption"]
    assert matrix.parse_dimensions(None) == []
    with pytest.raises(ValueError, match="curve"):
        matrix.parse_dimensions("protocol,curve")


def test_variants_are_the_cross_product_with_short_names_that_fit_the_column():
    variants = matrix.variants(["protocol", "cert"])
    assert len(variants) == 6  # RSA, ECDSA and Ed25519 under each protocol
    assert variants[0] == {
        "protocol": "tls1.2",
        "group": None,
        "cert": "rsa",
        "resumption": None,
        "client_cert": None,
    }
    assert matrix.variant_name(variants[0]) == "tls_new@1.2+rsa"
    everything = matrix.variants(list(matrix.DIMENSIONS))
    assert len(everything) == matrix.variant_count(list(matrix.DIMENSIONS)) == 2 * 3 * 3 * 3 * 3
    # "none" and "rsa" are values of other dimensions too: the client certificate's read apart.
    names = [matrix.variant_name(v) for v in matrix.variants(["resumption", "client_cert"])[:3]]
    assert names == ["tls_new@full+nocc", "tls_new@full+ccrsa", "tls_new@full+ccecdsa"]
    assert matrix.label("client_cert", "none") == "no client certificate"
    assert matrix.label("resumption", "none") == "a full handshake per connection"
    assert matrix.label("group", "secp384r1") == "secp384r1 key exchange"
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
    assert rsa["variant"] == {
        "protocol": "tls1.2",
        "group": None,
        "cert_key_type": "rsa",
        "resumption": None,
        "client_cert": None,
    }
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
    from portal.lib.runs import quotas

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


def test_named_groups_parse_by_openssl_names_and_add_variants():
    assert matrix.parse_groups("secp384r1, X448,,P-256,x25519") == ["secp384r1", "X448"]  # built-ins dropped
    assert matrix.parse_groups(["SecP256r1MLKEM768"]) == ["SecP256r1MLKEM768"]
    for bad in ("x y", "a;b", "a" * 33, "g1,g2,g3,g4,g5"):
        with pytest.raises(ValueError):
            matrix.parse_groups(bad)
    named = matrix.variants(["group"], groups=["secp384r1"])
    assert [matrix.variant_name(v) for v in named][-1] == "tls_new@secp384r1"
    assert matrix.variant_count(["group", "cert"], groups=["secp384r1"]) == 4 * 3
    # The negotiated group as OpenSSL prints it, whatever alias the variant was named by.
    assert matrix.same_group("p256", "secp256r1") and matrix.same_group("P-384", "secp384r1")
    assert matrix.same_group("x25519mlkem768", "X25519MLKEM768") and not matrix.same_group("x25519", None)
    assert not matrix.same_group("p256", "x25519")
    config = EngineConfig.from_dict(
        {
            "arms": [{"name": "tls_new", "url": "https://h/"}],
            "tls_matrix": ["group"],
            "tls_groups": "secp384r1",
            "warmup_s": 1,
            "duration_s": 1,
        }
    )
    assert config.tls_groups == ["secp384r1"] and config.arm_count() == 1 + 4


def hybrid_probe(name: str, group: str, client_bytes: int, server_bytes: int) -> dict:
    entry = probe(name, group=group)
    entry["negotiated"] = {
        "protocol": "TLSv1.3",
        "group": {"x25519mlkem768": "X25519MLKEM768", "x25519": "x25519"}[group],
        "client_handshake_bytes": client_bytes,
        "server_handshake_bytes": server_bytes,
        "client_flight_bytes": client_bytes - 64,
        "server_flight_bytes": server_bytes,
    }
    return entry


@pytest.mark.parametrize("hybrid_p50", [1300, 1150])
def test_the_hybrid_is_priced_per_handshake_and_at_peak_whichever_way_it_measured(hybrid_p50):
    from portal.lib.tls import advice

    probes = [
        hybrid_probe("tls_new@x25519", "x25519", 300, 1400),
        hybrid_probe("tls_new@mlkem", "x25519mlkem768", 1484, 2460),
    ]
    arms = []
    for round_index in range(3):  # three rounds: the CI over rounds, for the time and for the CPU
        for name, p50, cpu in (("tls_new", 1200, 0.5), ("tls_new@x25519", 1200, 0.5)):
            arms.append({**rows(name, p50 + round_index, cpu), "round": round_index})
        arms.append({**rows("tls_new@mlkem", hybrid_p50 + 2 * round_index, 0.62), "round": round_index})
    data = report.build_report({"id": "x"}, arms, {"protocol": "TLSv1.3"}, None, probes)
    (item,) = [a for a in data["advice"] if a.get("hybrid")]
    hybrid = item["hybrid"]
    assert item["title"].startswith("What the post-quantum hybrid costs: X25519MLKEM768")
    assert item["arms"] == ["tls_new@mlkem", "tls_new@x25519"]  # the hybrid first, even when cheaper
    assert hybrid["group"] == "X25519MLKEM768" and hybrid["versus"] == "x25519"
    assert hybrid["ttlb_us"] == pytest.approx(hybrid_p50 + 2 - 1201, abs=2)  # p50s of the merged rounds
    assert hybrid["ttlb_ci_method"] == "rounds" and item["saving_us"] == hybrid["ttlb_us"]
    assert hybrid["server_cpu_ms"] == pytest.approx(0.12) and hybrid["server_cpu_ci95"] is not None
    assert hybrid["cpu_source"] == "server_probe"
    assert (hybrid["client_bytes"], hybrid["server_bytes"]) == (1184, 1060)
    assert "X25519MLKEM768 costs" in item["evidence"] and "+1184 bytes from the client" in item["evidence"]
    # At 2,000 req/s with 25% on new connections: 500 handshakes/s, 0.06 cores, 1.12 MB/s more.
    peak = advice.hybrid_at_peak(hybrid, 2000, 0.25)
    assert peak["handshakes_per_s"] == 500 and peak["extra_cores"] == pytest.approx(0.06)
    assert peak["extra_bytes_per_s"] == 500 * (1184 + 1060)
    low, high = peak["extra_cores_ci95"]
    assert low == pytest.approx(500 * hybrid["server_cpu_ci95"][0] / 1000)
    assert high == pytest.approx(500 * hybrid["server_cpu_ci95"][1] / 1000)
    with pytest.raises(ValueError):
        advice.hybrid_at_peak(hybrid, 100, 1.5)
