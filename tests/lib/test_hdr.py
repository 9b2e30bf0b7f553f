"""The one-pass histogram readers give exactly what the hdrh package's own (slow) walks give."""

from __future__ import annotations

import random
import threading
import time

from portal.lib.stats import hdr


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


def _random_hist(rng: random.Random):
    """Histograms of several shapes: narrow, wide, a single value, extremes of the range."""
    h = hdr.new_histogram()
    shape = rng.choice(["lognormal", "uniform", "single", "extremes"])
    for _ in range(rng.randint(1, 3000)):
        if shape == "lognormal":
            value = int(rng.lognormvariate(rng.uniform(2, 12), rng.uniform(0.1, 2)))
        elif shape == "uniform":
            value = rng.randint(1, 10 ** rng.randint(1, 7))
        elif shape == "single":
            value = 4242
        else:
            value = rng.choice([hdr.HIST_MIN_US, hdr.HIST_MAX_US, 1000])
        h.record_value(min(max(value, hdr.HIST_MIN_US), hdr.HIST_MAX_US), rng.randint(1, 100))
    return h


def test_the_fast_readers_are_pinned_to_the_hdrh_release_they_were_written_for():
    """hdr.py reads hdrh's internals for speed; a new hdrh release must fail here first, not skew a
    report. Bump HDRH_VERSION (and requirements.txt) only once the comparison below passes."""
    from importlib.metadata import version
    from pathlib import Path

    assert version("hdrhistogram") == hdr.HDRH_VERSION
    pins = Path(__file__).resolve().parents[2].joinpath("requirements.txt").read_text().split()
    assert f"hdrhistogram=={hdr.HDRH_VERSION}" in pins
    rng = random.Random(20240607)
    levels = [0, 0.1, 1, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100]
    for _ in range(16):
        original = _random_hist(rng)
        # Fresh and decoded (as the report reads them) alike: the counts array comes from either path.
        for h in (original, hdr.HdrHistogram.decode(original.encode())):
            assert hdr.values_at_percentiles(h, levels) == {p: h.get_value_at_percentile(p) for p in levels}
            assert hdr.mean_value(h) == h.get_mean_value()
            slow = [
                (h.get_highest_equivalent_value(item.value_iterated_to), item.count_at_value_iterated_to)
                for item in h.get_recorded_iterator()
            ]
            assert hdr.highest_values(h) == slow
            assert sum(count for _, count in hdr.recorded(h)) == h.get_total_count()


class _YieldingDict(hdr.OrderedDict):
    """An OrderedDict that lets other threads run inside each operation, as a free-threaded Python
    may: the windows between reading and moving or evicting an entry become wide enough to hit."""

    def get(self, key, default=None):
        time.sleep(0)
        return super().get(key, default)

    def move_to_end(self, key, last=True):
        time.sleep(0)
        super().move_to_end(key, last)

    def popitem(self, last=True):
        time.sleep(0)
        return super().popitem(last)


def test_decode_cache_is_safe_from_many_threads(monkeypatch):
    """The web server decodes from several threads at once; a small cache evicts all the time. The
    decoding itself is stubbed to be instant, so the threads spend their time in the cache."""

    class Instant:
        @staticmethod
        def decode(text: str) -> tuple[str, str]:
            time.sleep(0)
            return ("decoded", text)

    monkeypatch.setattr(hdr, "HdrHistogram", Instant)
    monkeypatch.setattr(hdr, "_DECODED_MAX", 3)
    monkeypatch.setattr(hdr, "_DECODED", _YieldingDict())
    texts = [f"histogram-{n}" for n in range(5)]
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def hammer(offset: int) -> None:
        start.wait()
        try:
            for i in range(1000):
                text = texts[(i * (offset + 1)) % len(texts)]
                assert hdr.decode(text) == ("decoded", text)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(hdr._DECODED) <= 3
