"""Histogram helpers over encoded HDR histograms (µs, 1 µs … 60 s, 3 significant digits).

Django-free: the report is computed from stored histograms by pure functions.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from itertools import accumulate, compress

from hdrh.histogram import HdrHistogram

# The hdrhistogram release whose internals (``counts`` as a C array of 64-bit words, ``counts_len``,
# ``_hdr_median_equiv_value``) the fast readers below use. tests/lib/test_hdr.py fails when the
# installed release differs, and compares every fast reader with hdrh's own API.
HDRH_VERSION = "0.10.8"

HIST_MIN_US = 1
HIST_MAX_US = 60_000_000
HIST_DIGITS = 3
PERCENTILES = (50, 90, 95, 99)


def new_histogram() -> HdrHistogram:
    return HdrHistogram(HIST_MIN_US, HIST_MAX_US, HIST_DIGITS)


# Decoded histograms by their encoding (a report reads each one many times), least recent first.
# Shared by the web server's threads: every access holds the lock (an OrderedDict's move_to_end
# and popitem are not safe against each other); decoding itself runs outside it.
_DECODED: OrderedDict[str, HdrHistogram] = OrderedDict()
_DECODED_MAX = 256
_DECODED_LOCK = threading.Lock()


def _keep(text: str, hist: HdrHistogram) -> HdrHistogram:
    with _DECODED_LOCK:
        _DECODED[text] = hist
        _DECODED.move_to_end(text)
        while len(_DECODED) > _DECODED_MAX:
            _DECODED.popitem(last=False)
    return hist


def _cached(text: str) -> HdrHistogram | None:
    with _DECODED_LOCK:
        found = _DECODED.get(text)
        if found is not None:
            _DECODED.move_to_end(text)
        return found


def decode(encoded: str | None) -> HdrHistogram | None:
    """The histogram of an encoded string. Decoded histograms are shared between callers (and
    threads): read them, never record into them (``merge`` makes a new one)."""
    if not encoded:
        return None
    found = _cached(encoded)
    if found is not None:
        return found
    return _keep(encoded, HdrHistogram.decode(encoded))


def encode(hist: HdrHistogram) -> str:
    """The ASCII encoding of a final histogram (merged, not recorded into again); a later
    ``decode`` of the string returns this object instead of decoding it again."""
    return _keep_text(hist.encode().decode("ascii"), hist)


def _keep_text(text: str, hist: HdrHistogram) -> str:
    _keep(text, hist)
    return text


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


def recorded(hist: HdrHistogram) -> list[tuple[int, int]]:
    """(counts index, count) of every non-empty bucket, in value order.

    The ``hdrh`` package's own iterators and percentile lookups walk every one of the ~27 000
    counts in Python for each call; a report asks dozens of questions of each histogram. Reading
    the counts array once (in C) and keeping the non-empty indices makes every answer below a walk
    over a few hundred or thousand entries, with the same results as ``hdrh`` (tests compare them).
    """
    cached = getattr(hist, "_tollgate_recorded", None)
    if cached is not None and cached[0] == hist.total_count:
        return cached[1]
    counts = memoryview(hist.counts).cast("B").cast("Q")[: hist.counts_len]
    items = [(i, counts[i]) for i in compress(range(len(counts)), counts)]
    hist._tollgate_recorded = (hist.total_count, items)  # recomputed if anything is recorded later
    return items


def values_at_percentiles(hist: HdrHistogram, percentiles: Sequence[float]) -> dict[float, int]:
    """``hist.get_value_at_percentile(p)`` for every p: a running sum of the counts (in C) and a
    binary search per percentile, instead of hdrh's Python walk over every count per call."""
    cumulative = _cumulative(hist)
    out: dict[float, int] = {}
    for p in percentiles:
        index = bisect_left(cumulative, hist.get_target_count_at_percentile(p))
        if index >= len(cumulative):
            out[p] = 0
            continue
        value = hist.get_value_from_index(index)
        out[p] = hist.get_highest_equivalent_value(value) if p else hist.get_lowest_equivalent_value(value)
    return out


def _cumulative(hist: HdrHistogram) -> list[int]:
    cached = getattr(hist, "_tollgate_cumulative", None)
    if cached is not None and cached[0] == hist.total_count:
        return cached[1]
    counts = memoryview(hist.counts).cast("B").cast("Q")[: hist.counts_len]
    cumulative = list(accumulate(counts))
    hist._tollgate_cumulative = (hist.total_count, cumulative)
    return cumulative


# Median equivalent value of each counts index, per histogram layout (it depends on nothing else).
_MEDIANS: dict[tuple, dict[int, int]] = {}
_HIGHEST: dict[tuple, dict[int, int]] = {}


def _layout(hist: HdrHistogram) -> tuple:
    return (hist.unit_magnitude, hist.sub_bucket_half_count_magnitude, hist.sub_bucket_count)


def mean_value(hist: HdrHistogram, items: list[tuple[int, int]] | None = None) -> float:
    """``hist.get_mean_value()``: counts × the median equivalent value of their bucket."""
    if not hist.total_count:
        return 0.0
    items = recorded(hist) if items is None else items
    medians = _MEDIANS.setdefault(_layout(hist), {})
    total = 0
    for index, count in items:
        median = medians.get(index)
        if median is None:
            median = medians[index] = hist._hdr_median_equiv_value(hist.get_value_from_index(index))  # noqa: SLF001
        total += count * median
    return float(total) / hist.total_count


def highest_values(hist: HdrHistogram, items: list[tuple[int, int]] | None = None) -> list[tuple[int, int]]:
    """(highest equivalent value, count) of every non-empty bucket: what ``get_recorded_iterator``
    yields as ``value_iterated_to`` and ``count_at_value_iterated_to``."""
    items = recorded(hist) if items is None else items
    highest = _HIGHEST.setdefault(_layout(hist), {})
    out = []
    for index, count in items:
        value = highest.get(index)
        if value is None:
            value = highest[index] = hist.get_highest_equivalent_value(hist.get_value_from_index(index))
        out.append((value, count))
    return out


def summary(hist: HdrHistogram | None) -> dict | None:
    """Percentiles in whole µs (HDR resolution), mean to 0.1 µs; None when nothing was recorded."""
    if hist is None or hist.get_total_count() == 0:
        return None
    items = recorded(hist)
    at = values_at_percentiles(hist, PERCENTILES)
    out: dict = {f"p{p}": at[p] for p in PERCENTILES}
    out["min"] = hist.get_min_value()
    out["max"] = hist.get_max_value()
    out["mean"] = round(mean_value(hist, items), 1)
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
        for value, count in highest_values(h):
            idx = int((math.log10(max(value, 1)) - start) * per_decade)
            row[min(max(idx, 0), nbins - 1)] += count
        counts[name] = row
    return {"edges_us": [round(e, 1) for e in edges], "counts": counts}
