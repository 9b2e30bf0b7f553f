"""bench/calibrate runs end to end in a seconds-long mode (every arm against the demo target and a
throwaway nginx, flat out and at the default's pace) and prints its figures as the last line."""

from __future__ import annotations

import pytest

from bench.nginx import find_binary
from portal.lib.runs import runspec as defaults
from tests.conftest import bench_report

# The five HTTP/1.1 arms a default run is made of (tls_mtls and the HTTP/2 arms are not).
ARMS = ("plain", "tls", "plain_new", "tls_new", "tls_resumed")


def test_bench_calibrate_short_run_prints_every_arm_of_both_targets():
    if not find_binary():
        pytest.skip("needs nginx")
    report = bench_report("calibrate", "--duration", "1", "--warmup", "0.2", "--users", "2", "--rate", "20")
    assert set(report["targets"]) == {"demo", "nginx"}
    for target, arms in report["targets"].items():
        assert set(arms) == set(ARMS), target
        for arm, row in arms.items():
            assert row["flat_out"]["requests"] > 0 and row["flat_out"]["failures"] == 0, (target, arm)
            assert row["flat_out_rps"] > 0 and row["sustainable_rps"] <= row["flat_out_rps"], (target, arm)
            assert row["default"]["requests"] > 0, (target, arm)
            assert row["default"]["generator_saturation"] in ("pass", "warn", "fail"), (target, arm)
            assert row["default_share_pct"] == round(100 * 20 / row["sustainable_rps"], 1), (target, arm)
    shares = [row["default_share_pct"] for arms in report["targets"].values() for row in arms.values()]
    assert report["default"]["max_share_pct"] == max(shares)
    assert report["default"]["users"] == defaults.USERS and report["default"]["arrival_rate"] == 20
    assert report["machine"]["cores"] > 0
