"""bench/fidelity runs end to end in a seconds-long mode: the engine's five arms, curl, openssl
s_time and wrk against one throwaway nginx; the last line carries each side's figures and the
ratios between them."""

from __future__ import annotations

import shutil

import pytest

from bench.nginx import find_binary
from tests.conftest import bench_report

ARMS = ("plain", "plain_new", "tls", "tls_new", "tls_resumed")


def test_bench_fidelity_short_run_prints_both_sides_and_the_ratios():
    if not (find_binary() and all(shutil.which(tool) for tool in ("openssl", "curl", "wrk"))):
        pytest.skip("needs nginx, openssl, curl and wrk")
    report = bench_report("fidelity", "--duration", "0.5", "--warmup", "0.1", "--repeat", "4")
    assert report["benchmark"] == "tollgate-fidelity"
    assert set(report["tollgate"]) == set(ARMS)
    for arm in ARMS:
        row = report["tollgate"][arm]
        assert row["requests"] > 0 and row["failures"] == 0 and row["ttlb_us"] > 0, arm
    assert report["tollgate"]["tls_resumed"]["tls_sessions_reused"] > 0
    reference = report["reference"]
    assert reference["curl"]["cold"]["tls"]["n"] == reference["curl"]["warm"]["tls"]["n"] == 4
    assert reference["s_time"]["new"]["connections"] > 0 and reference["s_time"]["reuse"]["resumed"] > 0
    assert reference["wrk"]["plain"]["rps"] > 0 and reference["wrk"]["tls"]["rps"] > 0
    for key in ("handshake_us", "handshake_connection_us", "keepalive_rps_plain", "keepalive_rps_tls"):
        assert report["ratios"][key] > 0, key
    for key in ("handshake_within_10pct", "handshake_connection_within_10pct"):
        assert isinstance(report[key], bool), key
