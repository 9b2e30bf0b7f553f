"""The recorder counts values in dicts and adds them to the HDR histograms in batches: the histograms
and the per-second percentiles must equal what one ``record_value`` per request gives."""

from __future__ import annotations

import random
import time

from workers.engine.http.sample import Sample
from workers.engine.recording.recorder import ArmRecorder, new_histogram, percentiles


def _values(seed: int, n: int) -> list[int]:
    rng = random.Random(seed)
    # Loopback-like µs latencies, a long tail, and values beyond the histogram's range (clamped).
    return [max(0, int(rng.lognormvariate(5, 1.2))) for _ in range(n)] + [0, 1, 70_000_000]


def test_percentiles_equal_hdrh_walk():
    for seed in range(5):
        values = _values(seed, 2000)
        hist = new_histogram()
        counts: dict[int, int] = {}
        for v in values:
            hist.record_value(min(max(v, 1), 60_000_000))
            counts[v] = counts.get(v, 0) + 1
        wanted = (0.1, 50, 80, 95, 99, 99.9, 100)
        assert percentiles(counts, wanted) == [hist.get_value_at_percentile(p) for p in wanted]
    assert percentiles({}, (50, 99)) == [None, None]


def test_recorder_histograms_and_series_equal_one_record_per_request():
    recorder = ArmRecorder("plain")
    recorder.record(Sample("/", start_ns=0, status=200, ttfb_us=5, ttlb_us=9), True)  # warm-up
    recorder.start_window()
    direct = {name: new_histogram() for name in ("ttfb", "ttlb", "connect", "tls")}
    second_ttlb = new_histogram()
    points = []
    values = _values(7, 3000)
    for i, v in enumerate(values):
        start = recorder.window_start_ns + i
        sample = Sample("/", start_ns=start, status=200, ttfb_us=v, ttlb_us=v + i % 7)
        if i % 3 == 0:
            sample.connect_us, sample.tls_handshake_us = v // 2, v
        recorder.record(sample, True)
        clamp = lambda x: min(max(x, 1), 60_000_000)  # noqa: E731
        direct["ttfb"].record_value(clamp(v))
        direct["ttlb"].record_value(clamp(v + i % 7))
        second_ttlb.record_value(clamp(v + i % 7))
        if i % 3 == 0:
            # connect_us keeps a 0 (an HTTP/3 connection has no transport handshake of its own)
            direct["connect"].record_value(min(v // 2, 60_000_000))
            direct["tls"].record_value(clamp(v))
        if i % 1000 == 999:
            point = recorder.roll_second()
            assert point["p99_us"] == second_ttlb.get_value_at_percentile(99)
            assert point["p50_us"] == second_ttlb.get_value_at_percentile(50)
            second_ttlb.reset()
            points.append(point)
    recorder.close_window()
    result = recorder.result()
    assert result["requests"] == len(values) and recorder.warmup_requests == 1
    assert [p["requests"] for p in points] == [1000, 1000, 1000]
    for key, name in (
        ("ttfb_us", "ttfb"),
        ("ttlb_us", "ttlb"),
        ("connect_us", "connect"),
        ("tls_handshake_us", "tls"),
    ):
        assert result["hist"][key] == direct[name].encode().decode("ascii"), key
    assert result["sizes_by_url"] == {"/": [0]}


def test_answers_outside_the_warm_up_and_the_window_are_counted_apart_and_never_measured():
    recorder = ArmRecorder("tls_resumed")
    recorder.record(Sample("/", start_ns=0, status=200, ttfb_us=5, ttlb_us=9), True)  # warm-up
    started_before = time.perf_counter_ns()
    recorder.start_window()
    recorder.record(Sample("/", start_ns=started_before, status=200, ttfb_us=5, ttlb_us=9), True)  # straddles
    recorder.record(
        Sample("/", start_ns=recorder.window_start_ns + 1, status=200, ttfb_us=5, ttlb_us=9), True
    )
    recorder.close_window()
    recorder.record(Sample("/", start_ns=recorder.window_end_ns - 1, status=200, ttfb_us=5, ttlb_us=9), True)
    result = recorder.result()
    assert (recorder.warmup_requests, result["requests"], result["unwindowed_requests"]) == (1, 1, 2)
