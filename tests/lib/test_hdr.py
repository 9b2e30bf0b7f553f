"""The one-pass histogram readers give exactly what the hdrh package's own (slow) walks give."""

from __future__ import annotations

import random

from portal.lib import hdr


def _hist(seed: int):
    rng = random.Random(seed)
    h = hdr.new_histogram()
    for _ in range(5000):
        h.record_value(max(1, int(800 * rng.lognormvariate(0, 0.6))), rng.randint(1, 50))
    h.record_value(3_000_000, 3)  # a SYN-retransmit-like tail
    return h


def test_percentiles_mean_and_recorded_values_match_hdrh():
    levels = [0, 1, 50, 90, 95, 99, 99.9, 99.99, 100]
    for seed in range(3):
        h = _hist(seed)
        fast = hdr.values_at_percentiles(h, levels)
        assert fast == {p: h.get_value_at_percentile(p) for p in levels}
        assert hdr.mean_value(h) == h.get_mean_value()
        slow = [
            (h.get_highest_equivalent_value(item.value_iterated_to), item.count_at_value_iterated_to)
            for item in h.get_recorded_iterator()
        ]
        assert hdr.highest_values(h) == slow
        assert sum(c for _, c in hdr.recorded(h)) == h.get_total_count()


def test_empty_histogram():
    h = hdr.new_histogram()
    assert hdr.recorded(h) == [] and hdr.mean_value(h) == 0.0
    assert hdr.summary(h) is None
