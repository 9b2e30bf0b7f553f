"""Compare math on hand-made reports."""

from __future__ import annotations

from portal.lib.report import compare


def fake_report(users: int, tls_p50: int, ci: list | None, tls_info: dict | None = None) -> dict:
    return {
        "run": {
            "id": f"run-{users}-{tls_p50}",
            "status": "succeeded",
            "created": "2026-11-22T00:00:00+00:00",
            "target": {"name": "svc", "plain_url": "http://h/", "tls_url": "https://h/"},
            "config": {"arms": [{"name": "plain"}, {"name": "tls"}], "users": users, "duration_s": 10},
            "engine": {"host": "gen1", "locust": "2.47.0"},
            "config_hash": f"hash{users}",
        },
        "tls_info": tls_info or {"protocol": "TLSv1.3", "cert_key_type": "RSA", "cert_key_bits": 2048},
        "headline": None,
        "arms": {
            "plain": {
                "ttlb_us": {"p50": 400, "p95": 500, "p99": 600, "count": 1000},
                "ttfb_us": None,
                "rps": 100.0,
                "requests": 1000,
            },
            "tls": {
                "ttlb_us": {"p50": tls_p50, "p95": 600, "p99": 700, "count": 1000},
                "ttfb_us": None,
                "rps": 80.0,
                "requests": 800,
            },
        },
        "costs": [
            {
                "name": "keepalive_tls",
                "metric": "ttlb_p50_us",
                "delta": tls_p50 - 400,
                "delta_pct": None,
                "ci95": ci,
                "verdict": "noticeable",
            }
        ],
    }


def test_setup_differences_come_with_values_per_run():
    reports = [fake_report(2, 500, [90, 110]), fake_report(4, 500, [90, 110], {"protocol": "TLSv1.2"})]
    differing, same = compare.setup_differences(reports)
    keys = {d["key"]: d["values"] for d in differing}
    assert keys["users"] == [2, 4] and keys["tls_protocol"] == ["TLSv1.3", "TLSv1.2"]
    assert keys["cert_key"] == ["RSA 2048", None]
    assert "target" in {d["key"] for d in same}


def test_significance_is_interval_overlap():
    assert compare.significance([90, 110], [100, 120]) == "not significant"
    assert compare.significance([130, 150], [100, 120]) == "significant"
    assert compare.significance([120, 150], [100, 120]) == "not significant"  # touching intervals overlap
    assert compare.significance(None, [100, 120]) == "unknown"


def test_cost_and_arm_tables_change_against_the_first_run():
    data = compare.compare(
        [fake_report(2, 500, [90, 110]), fake_report(2, 700, [280, 320]), fake_report(2, 510, None)]
    )
    cells = data["costs"][0]["cells"]
    assert cells[0]["change"] is None
    assert cells[1]["change"] == {"delta": 200, "pct": 200.0, "significance": "significant"}
    assert cells[2]["change"]["significance"] == "unknown"
    row = next(r for r in data["arms"] if r["arm"] == "tls" and r["metric"] == "ttlb_p50_us")
    assert row["values"] == [500, 700, 510]
    assert row["changes"][1] == {"delta": 200, "pct": 40.0} and row["samples"] == [1000, 1000, 1000]
    rps = next(r for r in data["arms"] if r["arm"] == "tls" and r["metric"] == "rps")
    assert rps["values"] == [80.0, 80.0, 80.0] and rps["changes"][2] == {"delta": 0.0, "pct": 0.0}


def test_openssl_speed_compared_across_hosts_and_runs():
    from pathlib import Path

    from portal.lib.report.compare import openssl_speed_table
    from workers.probes.parsers import parse_openssl_speed

    data = Path(__file__).resolve().parent.parent / "probes" / "data"
    v3 = parse_openssl_speed((data / "openssl-speed-3.0.19.txt").read_text())
    v1 = parse_openssl_speed((data / "openssl-speed-1.1.1w.txt").read_text())
    reports = [
        {"probes": {"openssl_speed": {"x": v3}}},
        {"probes": {}},
        {"probes": {"openssl_speed": {"y": v1}}},
    ]
    table = openssl_speed_table(reports)
    assert [(c["run"], c["host"]) for c in table["columns"]] == [(1, "x"), (3, "y")]
    rsa_sign = next(r for r in table["rows"] if r["algorithm"] == "rsa2048" and r["figure"] == "sign/s")
    # 1.1.1w signed 1450.5/s, 3.0.19 3108.08/s on the recorded runs: ratio 0.467.
    assert rsa_sign["values"] == [3108.080808, 1450.505051]
    assert rsa_sign["ratios"] == [1.0, round(1450.505051 / 3108.080808, 3)]
    gcm = next(
        r for r in table["rows"] if r["algorithm"] == "aes-128-gcm" and r["figure"] == "bytes/s at 16384 B"
    )
    assert gcm["values"] == [3887546368.0, 4817305600.0]
    assert openssl_speed_table([{"probes": {}}]) is None


def test_a_change_of_tls_library_is_a_setup_difference():
    bundled = {"choice": "bundled", "openssl": "OpenSSL 4.0.0 14 Apr 2026", "binding": "pyOpenSSL 26.2.0"}
    system = {"choice": "system", "openssl": "OpenSSL 3.0.22 25 Aug 2026", "binding": "ssl"}
    older, on_system, on_bundled = (fake_report(2, 500, [90, 110]) for _ in range(3))
    older["run"]["engine"]["openssl"] = "OpenSSL 3.0.22 25 Aug 2026"  # before the option: system
    on_system["run"]["engine"].update(openssl=system["openssl"], tls_library=system)
    on_bundled["run"]["engine"].update(openssl=system["openssl"], tls_library=bundled)
    differing, same = compare.setup_differences([older, on_system, on_bundled])
    keys = {d["key"]: d["values"] for d in differing}
    assert keys == {
        "tls_library": [
            "system: ssl on OpenSSL 3.0.22 25 Aug 2026",
            "system: ssl on OpenSSL 3.0.22 25 Aug 2026",
            "bundled: pyOpenSSL 26.2.0 on OpenSSL 4.0.0 14 Apr 2026",
        ]
    }
    assert "tls_library" in {d["key"] for d in compare.setup_differences([older, on_system])[1]}
