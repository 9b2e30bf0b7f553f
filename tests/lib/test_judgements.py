"""Regression judgement against a baseline, by interval overlap and tolerance, and what changed."""

from __future__ import annotations

import pytest

from portal.lib.watching import alerts, judgements


def report(
    run_id: str,
    costs: dict,
    tls: dict | None = None,
    users: int = 2,
    version: int = 1,
    server: dict | None = None,
) -> dict:
    software = server if server is not None else {"tls": "nginx/1.22.1", "plain": "nginx/1.22.1"}
    return {
        "run": {
            "id": run_id,
            "target": {
                "name": "t",
                "plain_url": "http://h/",
                "tls_url": "https://h/",
                "server_software": software,
            },
            "config": {"arms": [{"name": "plain_new"}, {"name": "tls_new"}], "users": users},
            "engine": {"host": "gen1", "locust": "2.47.0", "openssl": "OpenSSL 3.0"},
            "tollgate": "1.0",
            "scenario": {"id": "s", "name": "n", "version": version},
            "config_hash": f"h{users}",
        },
        "tls_info": {
            "protocol": "TLSv1.3",
            "cipher": "TLS_AES_256_GCM_SHA384",
            "group": "x25519",
            "cert_key_type": "EC",
            "cert_key_bits": 256,
            "chain_length": 1,
            "chain_bytes": 480,
            "session_resumed": True,
            **(tls or {}),
        },
        "costs": [
            {"name": name, "metric": "ttlb_p50_us", "delta": delta, "ci95": ci, "not_judged": None}
            for name, (delta, ci) in costs.items()
        ],
    }


BASE = report("base", {"handshake": (2000, [1900, 2100]), "resumption_saving": (1500, [1400, 1600])})


@pytest.mark.parametrize(
    ("handshake", "tolerance_pct", "expected"),
    [
        ((4000, [3900, 4100]), 10, "regression"),  # gap 1,800 µs > 200 µs
        ((2250, [2150, 2350]), 10, "unchanged"),  # the intervals overlap
        # Above the baseline's interval (2,250 − 2,100 = 150 µs), but within 10% of 2,000 µs.
        ((2350, [2250, 2450]), 10, "unchanged"),
        ((1000, [900, 1100]), 10, "improvement"),
        ((4000, None), 10, "unknown"),
        ((4000, [3900, 4100]), 100, "unchanged"),  # gap 1,800 µs within 100% of 2,000 µs
    ],
)
def test_a_cost_is_judged_by_interval_gap_against_the_tolerance(handshake, tolerance_pct, expected):
    run = report("run", {"handshake": handshake})
    [cost] = judgements.judge(run, BASE, tolerance_pct)["costs"]
    assert cost["judgement"] == expected, cost
    assert cost["tolerance_us"] == max(1.0, 2000 * tolerance_pct / 100)


def test_a_shrinking_saving_is_the_regression_and_the_worst_wins():
    run = report("run", {"handshake": (1000, [900, 1100]), "resumption_saving": (100, [0, 200])})
    result = judgements.judge(run, BASE)
    by_name = {c["name"]: c["judgement"] for c in result["costs"]}
    assert by_name == {"handshake": "improvement", "resumption_saving": "regression"}
    assert result["status"] == "regression" and result["baseline"] == "base"


def test_a_not_judged_cost_makes_no_claim():
    run = report("run", {"handshake": (4000, [3900, 4100])})
    run["costs"][0]["not_judged"] = "tls_new is invalid: …"
    assert judgements.judge(run, BASE)["status"] == "unknown"


def test_what_changed_lists_the_setup_before_and_after_in_words():
    run = report(
        "run",
        {"handshake": (4000, [3900, 4100])},
        {"cert_key_type": "RSA", "cert_key_bits": 4096, "chain_bytes": 1310, "session_resumed": False},
        users=4,
        version=2,
    )
    changes = {c["key"]: (c["label"], c["before"], c["after"]) for c in judgements.what_changed(run, BASE)}
    assert changes["cert_key"] == ("certificate key", "EC 256", "RSA 4096")
    assert changes["cert_chain_bytes"] == ("certificate chain bytes", 480, 1310)
    assert changes["tls_resumption"] == ("session resumption", "resumed", "not resumed")
    assert changes["users"] == ("users", 2, 4) and changes["scenario_version"][1:] == (1, 2)
    assert "config_hash" not in changes and "cert_chain_length" not in changes  # a hash explains nothing


def test_the_alert_names_the_cost_change_with_intervals_what_changed_and_the_links():
    run = report("run", {"handshake": (4000, [3900, 4100])}, {"cert_key_type": "RSA", "cert_key_bits": 4096})
    result = judgements.judge(run, BASE)
    links = {"run": "http://p/runs/r/", "baseline": "http://p/runs/b/", "compare": "http://p/c?runs=b,r"}
    text = alerts.text(result, "nightly", "t", links)
    assert (
        "- A full TLS handshake per request rose by +2.00 ms, +100.0%: 4.00 ms (95% CI 3.90–4.10 ms) "
        "against the baseline's " in text
    )
    assert "2.00 ms (95% CI 1.90–2.10 ms)" in text and "- certificate key: EC 256 → RSA 4096" in text
    assert "Compare: http://p/c?runs=b,r" in text and "Share link" not in text
    assert "Share link (read-only, no login): http://p/s/x/" in alerts.text(
        result, "n", "t", {**links, "share": "http://p/s/x/"}
    )
    body = alerts.callback(result, {"id": "s"}, "r", links, text)
    assert body["event"] == "regression" and [c["name"] for c in body["costs"]] == ["handshake"]
    assert alerts.incoming_webhook(text) == {"text": text}


def test_a_server_upgrade_is_among_what_changed_and_in_the_alert():
    upgraded = {"tls": "nginx/1.26.0", "plain": "nginx/1.26.0"}
    run = report("run", {"handshake": (4000, [3900, 4100])}, server=upgraded)
    result = judgements.judge(run, BASE)
    [change] = [c for c in result["changes"] if c["key"] == "server_software"]
    assert change == {
        "key": "server_software",
        "label": "server software",
        "before": "nginx/1.22.1",
        "after": "nginx/1.26.0",
    }
    text = alerts.text(result, "nightly", "t", {"run": "r", "baseline": "b", "compare": "c"})
    assert "- server software: nginx/1.22.1 → nginx/1.26.0" in text
    # Only the TLS URL's server changed: both are named, by URL.
    split = report("run", {}, server={"tls": "nginx/1.26.0", "plain": "nginx/1.22.1"})
    [change] = [c for c in judgements.what_changed(split, BASE) if c["key"] == "server_software"]
    assert change["after"] == "nginx/1.26.0 (TLS URL), nginx/1.22.1 (plain URL)"
    # One URL that sent nothing (or had no arm) is no change; a report from before it was kept says
    # nothing, and the change reads "—".
    tls_only = report("run", {}, server={"tls": "nginx/1.22.1", "plain": None})
    assert "server_software" not in {c["key"] for c in judgements.what_changed(tls_only, BASE)}
    older = report("run", {}, server={})
    older["run"]["target"]["server_software"] = None
    [change] = [c for c in judgements.what_changed(run, older) if c["key"] == "server_software"]
    assert (change["before"], change["after"]) == (None, "nginx/1.26.0")
    assert judgements.describe_change(change) == "server software: — → nginx/1.26.0"
