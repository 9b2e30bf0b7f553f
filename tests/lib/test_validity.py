"""Thresholds of the validity checks on hand-made arm sections (the live tests fire them for real)."""

from __future__ import annotations

from portal.lib import hdr
from portal.lib.validity import answers, measurement


def arm(requests: int = 2000, **extra) -> dict:
    base = {
        "requests": requests,
        "rps": requests / 10,
        "status_codes": {"200": requests},
        "errors": {},
        "sizes_by_path": {"/1k": [1024]},
        "series": [],
        "ttlb_us": {"count": requests},
        "hdr": {},
        "connections_opened": 0,
        "tls_sessions_reused": 0,
    }
    base.update(extra)
    return base


def series(cpu: list[float], lag: float = 0.2, p50: list[int] | None = None) -> list[dict]:
    p50 = p50 or [500] * len(cpu)
    return [
        {"gen_cpu_pct": c, "loop_lag_ms": lag, "p50_us": p, "requests": 100}
        for c, p in zip(cpu, p50, strict=True)
    ]


def test_generator_saturation_threshold_is_on_the_median_cpu():
    hot = measurement.check_generator({}, {"plain": arm(series=series([84, 90, 95]))})
    cool = measurement.check_generator({}, {"plain": arm(series=series([84, 84, 99]))})
    assert (hot["status"], cool["status"]) == ("warn", "pass")
    assert hot["evidence"]["plain"]["cpu_pct_median"] == 90


def test_generator_saturation_fires_on_loop_lag_alone():
    laggy = measurement.check_generator({}, {"plain": arm(series=series([20, 20, 20], lag=12.0))})
    assert laggy["status"] == "warn" and "event-loop lag 12.0 ms" in laggy["detail"]


def test_drift_compares_halves_and_needs_both_relative_and_absolute_change():
    slower = measurement.check_drift(
        {"plain": arm(series=series([10] * 6, p50=[1000, 1000, 1000, 1400, 1400, 1400]))}
    )
    assert slower["status"] == "warn" and slower["evidence"]["plain"]["p50_us"]["change_pct"] == 40.0
    # +40% but only +40 µs: loopback jitter, not drift.
    tiny = measurement.check_drift(
        {"plain": arm(series=series([10] * 6, p50=[100, 100, 100, 140, 140, 140]))}
    )
    assert tiny["status"] == "pass"
    short = measurement.check_drift({"plain": arm(series=series([10] * 3))})
    assert short["status"] == "pass" and "Not judged" in short["detail"]


def test_sample_size_levels():
    assert measurement.check_sample_size({"a": arm(1000)})["status"] == "pass"
    few = measurement.check_sample_size({"a": arm(999)})
    assert few["status"] == "warn" and few["evidence"]["a"]["too_few_for"] == ["p99"]
    assert measurement.check_sample_size({"a": arm(19)})["status"] == "fail"


def test_syn_retransmit_counts_connects_near_one_and_three_seconds():
    h = hdr.new_histogram()
    for value in [400] * 50 + [1_010_000] * 3 + [3_020_000] * 2 + [2_000_000]:
        h.record_value(value)
    found = measurement.check_syn_retransmit(
        {"plain_new": arm(hdr={"connect_us": h.encode().decode()}, connections_opened=56)}
    )
    assert found["status"] == "warn"
    assert found["evidence"]["plain_new"] == {
        "slow_connects": 6,
        "near_1s": 3,
        "near_3s": 2,
        "near_7s": 0,
        "connections": 56,
    }


def test_status_codes_respect_the_expected_set():
    arms = {"plain": arm(status_codes={"200": 10, "204": 5})}
    assert answers.check_status_codes({"expected_status": [200]}, arms)["status"] == "fail"
    assert answers.check_status_codes({"expected_status": [200, 204]}, arms)["status"] == "pass"
    assert answers.check_status_codes({}, arms)["status"] == "pass"  # default: any 2xx
    assert answers.expected_label(list(range(200, 300)) + [301]) == "2xx, 301"


def test_errors_warn_below_one_percent_and_fail_above():
    some = {"count": 5, "samples": ["TimeoutError"]}
    assert answers.check_errors({"a": arm(1000, errors={"timeout": some})})["status"] == "warn"
    many = {"count": 50, "samples": ["TimeoutError"]}
    assert answers.check_errors({"a": arm(1000, errors={"timeout": many})})["status"] == "fail"


def test_content_length_only_compares_arms_with_one_size_per_path():
    varying = {"plain": arm(sizes_by_path={"/p": [900, 1000]}), "tls": arm(sizes_by_path={"/p": [950]})}
    assert answers.check_content_length(varying)["status"] == "warn"
    same = {"plain": arm(), "tls": arm()}
    assert answers.check_content_length(same)["status"] == "pass"


def test_tls_sessions_fail_when_tls_new_resumes():
    found = answers.check_tls_sessions({"tls_new": arm(connections_opened=10, tls_sessions_reused=2)})
    assert found["status"] == "fail" and "must do full handshakes" in found["detail"]
