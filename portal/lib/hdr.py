"""Histogram helpers over encoded HDR histograms (µs, 1 µs … 60 s, 3 significant digits).

Django-free: the report is computed from stored histograms by pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

HIST_MIN_US = 1
HIST_MAX_US = 60_000_000
HIST_DIGITS = 3
PERCENTILES = (50, 90, 95, 99)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(HIST_MIN_US, HIST_MAX_US, HIST_DIGITS)


def decode(encoded: str | None) -> HdrHistogram | None:
    if not encoded:
        return None
    return HdrHistogram.decode(encoded)


def merge(encoded_items: Iterable[str | None]) -> HdrHistogram | None:
    """Exact merge of several encoded histograms (rounds, Locust workers)."""
    merged = None
    for encoded in encoded_items:
        if not encoded:
            continue
        if merged is None:
            merged = new_histogram()
        merged.decode_and_add(encoded)
    return merged


def summary(hist: HdrHistogram | None) -> dict | None:
    """Percentiles in whole µs (HDR resolution), mean to 0.1 µs; None when nothing was recorded."""
    if hist is None or hist.get_total_count() == 0:
        return None
    out: dict = {f"p{p}": hist.get_value_at_percentile(p) for p in PERCENTILES}
    out["min"] = hist.get_min_value()
    out["max"] = hist.get_max_value()
    out["mean"] = round(hist.get_mean_value(), 1)
    out["count"] = hist.get_total_count()
    return out


def log_bins(hists: dict[str, HdrHistogram | None], per_decade: int = 20) -> dict:
    """Counts of several histograms in shared log-spaced bins, for an overlay chart.

    Returns {"edges_us": [...], "counts": {name: [...]}} with len(edges) == len(counts) + 1.
    """
    present = {name: h for name, h in hists.items() if h is not None and h.get_total_count()}
    if not present:
        return {"edges_us": [], "counts": {}}
    lo = min(h.get_min_value() for h in present.values())
    hi = max(h.get_max_value() for h in present.values())
    start = math.floor(math.log10(max(lo, 1)) * per_decade) / per_decade
    stop = math.ceil(math.log10(max(hi, 1) + 1) * per_decade) / per_decade
    nbins = max(1, round((stop - start) * per_decade))
    edges = [10 ** (start + i / per_decade) for i in range(nbins + 1)]
    counts: dict[str, list[int]] = {}
    for name, h in present.items():
        row = [0] * nbins
        for item in h.get_recorded_iterator():
            value = h.get_highest_equivalent_value(item.value_iterated_to)
            idx = int((math.log10(max(value, 1)) - start) * per_decade)
            row[min(max(idx, 0), nbins - 1)] += item.count_at_value_iterated_to
        counts[name] = row
    return {"edges_us": [round(e, 1) for e in edges], "counts": counts}
