"""bench/generator runs end to end in a tiny mode and prints its figures as the last line."""

from __future__ import annotations

import shutil

import pytest

from portal.lib import hostcapacity
from tests.conftest import bench_report


def test_bench_generator_tiny_run_prints_the_ratios():
    from bench.nginx import find_binary

    if not (find_binary() and shutil.which("wrk") and shutil.which("openssl") and shutil.which("h2load")):
        pytest.skip("needs nginx, wrk, openssl and h2load")
    report = bench_report("generator", "--duration", "1", "--warmup", "0.2", "--users", "2")
    keys = (
        "keepalive_plain_vs_wrk",
        "keepalive_tls_vs_wrk",
        "handshakes_vs_s_time",
        "h2_vs_h2load",
        "scaling_2",
    )
    for key in keys:
        assert report[key] > 0, key
    assert report["engine"]["plain"]["requests"] > 0 and report["wrk"]["plain"]["requests"] > 0
    assert report["s_time"]["connections"] > 0 and report["h2load"]["requests"] > 0
    assert report["engine"]["h2"]["requests"] > 0
    assert set(report["overhead"]) == {"plain_new", "tls_new"}
    # What `manage.py tollgate record-bench` keeps of it for the operators' page (docs/operations.md).
    figures = hostcapacity.bench_figures(report)
    assert all(figures[arm] > 0 for arm in ("plain", "tls", "tls_new")) and figures["cores"] >= 1
