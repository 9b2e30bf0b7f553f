"""portal/lib/stats/hostcapacity.py: requests per generator CPU-second from stored arms and bench figures."""

from __future__ import annotations

import pytest

from portal.lib.stats import hostcapacity


def test_a_single_process_arm_divides_its_rate_by_its_median_cpu():
    series = [{"gen_cpu_pct": pct} for pct in (40.0, 50.0, 60.0, None)]
    # 5,000 requests/s at half a core: 10,000 requests per CPU-second.
    assert hostcapacity.arm_rates("tls", 5000.0, series, [], "gen1") == [("gen1", "keep-alive", 10000.0)]
    assert hostcapacity.arm_rates("tls_new", 500.0, series, [], "gen1") == [
        ("gen1", "new connection", 1000.0)
    ]


def test_without_cpu_or_host_or_requests_there_is_no_figure():
    assert hostcapacity.arm_rates("plain", 100.0, [], [], "gen1") == []
    assert hostcapacity.arm_rates("plain", 100.0, [{"gen_cpu_pct": 20.0}], [], "") == []
    assert hostcapacity.arm_rates("plain", 0.0, [{"gen_cpu_pct": 20.0}], [], "gen1") == []


def test_a_distributed_arm_sums_each_hosts_workers_and_skips_lost_ones():
    workers = [
        {"host": "a", "arms": {"plain": {"requests": 3000, "cpu_s": 1.0}}, "lost_at": None},
        {"host": "a", "arms": {"plain": {"requests": 1000, "cpu_s": 1.0}}, "lost_at": None},
        {"host": "b", "arms": {"plain": {"requests": 900, "cpu_s": 0.3}}, "lost_at": None},
        {"host": "c", "arms": {"plain": {"requests": 10, "cpu_s": 0.1}}, "lost_at": 3.2},
        {"host": "d", "arms": {"tls": {"requests": 10, "cpu_s": 0.1}}, "lost_at": None},
    ]
    got = hostcapacity.arm_rates("plain", 999.0, [{"gen_cpu_pct": 99.0}], workers, "a")
    assert sorted(got) == [("a", "keep-alive", 2000.0), ("b", "keep-alive", 3000.0)]


def test_summarize_takes_medians_per_host_and_kind_with_counts():
    rates = [
        ("a", "keep-alive", 10.0),
        ("a", "keep-alive", 30.0),
        ("a", "keep-alive", 20.0),
        ("a", "new connection", 5.0),
    ]
    assert hostcapacity.summarize(rates) == {
        "a": {"keep-alive": {"per_cpu_s": 20.0, "arms": 3}, "new connection": {"per_cpu_s": 5.0, "arms": 1}}
    }


def test_bench_figures_refuse_what_is_not_the_full_report():
    with pytest.raises(ValueError, match="full report"):
        hostcapacity.bench_figures({"overhead_runs": [], "settings": {}, "machine": {}})
