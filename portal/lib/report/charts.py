"""Chart data of the report page, from stored histograms: the overlay of every arm's latency
distribution and each arm's percentile curve. Pure functions (no database)."""

from __future__ import annotations

from portal.lib.stats import hdr

# Percentile levels of the percentile curve (p0 … p99.99), spaced for a 1/(1−p) axis.
CURVE_LEVELS = (0, 10, 25, 50, 75, 90, 95, 97.5, 99, 99.5, 99.9, 99.95, 99.99, 100)


def histogram_overlay(arms: list[dict], metric: str = "ttlb_us") -> dict:
    """Log-binned counts of one metric for every arm (rounds merged), for the overlay chart."""
    encoded: dict[str, list] = {}
    for arm in arms:
        encoded.setdefault(arm["arm"], []).append(arm.get("hist", {}).get(metric))
    hists = {
        name: (hdr.decode(items[0]) if len(items) == 1 else hdr.merge(items))
        for name, items in encoded.items()
    }
    return hdr.log_bins(hists)


def percentile_curve(hist) -> list[list[float]] | None:
    """[[percentile, value_us], …] at CURVE_LEVELS: the whole distribution, tail included."""
    if hist is None or hist.get_total_count() == 0:
        return None
    at = hdr.values_at_percentiles(hist, [level for level in CURVE_LEVELS if level not in (0, 100)])
    out = []
    for level in CURVE_LEVELS:
        if level == 0:
            value = hist.get_min_value()
        elif level == 100:
            value = hist.get_max_value()
        else:
            value = at[level]
        out.append([level, value])
    return out
