"""The bootstrap behind every 95% interval of a cost (``portal.lib.stats.costs``): percentile intervals of
a resampled statistic, shifted onto the point estimate. Pure functions; seeded generators, so a
report reads the same every time.

The median of a resample is drawn directly from its exact bootstrap distribution rather than by
building and sorting the resample: resampling n values means drawing indices floor(n·U) for n
uniforms U, which is monotone in U, so the k-th smallest resampled value is the sorted value at
floor(n·U₍ₖ₎), with U₍ₖ₎ ~ Beta(k, n − k + 1) the k-th order statistic of n uniforms (and, for an
even n, U₍ₖ₊₁₎ = U₍ₖ₎ + (1 − U₍ₖ₎)·(1 − V^(1/(n−k))), V uniform). Same distribution, O(1) per draw,
so long series cost no more than short ones.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Sequence

CI_LEVEL = 0.95


def rng(seed: int) -> random.Random:
    """A fresh seeded generator: statistics, not secrets, and a report must be reproducible."""
    return random.Random(seed)  # noqa: S311


def percentile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics at position q·(n − 1); ``ordered`` is sorted."""
    position = q * (len(ordered) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def interval(draw: Callable[[], float], original: float, point: float, resamples: int) -> tuple[float, float]:
    """Percentile interval of ``resamples`` draws of a statistic, shifted by (point − original)."""
    draws = sorted(draw() for _ in range(max(resamples, 1)))
    tail = (1.0 - CI_LEVEL) / 2.0
    shift = point - original
    return percentile(draws, tail) + shift, percentile(draws, 1.0 - tail) + shift


def bootstrap_mean(
    diffs: list[float], point: float, resamples: int, rng: random.Random
) -> tuple[float, float]:
    """Interval for the mean of ``diffs`` (few values: resampled literally)."""
    n = len(diffs)
    return interval(lambda: math.fsum(rng.choices(diffs, k=n)) / n, math.fsum(diffs) / n, point, resamples)


def bootstrap_median_diff(
    arm: list[float], base: list[float], point: float, resamples: int, rng: random.Random
) -> tuple[float, float]:
    """Interval for median(arm) − median(base), the two resampled independently."""
    arm_median, base_median = resampled_median(arm, rng), resampled_median(base, rng)
    return interval(
        lambda: arm_median() - base_median(),
        statistics.median(arm) - statistics.median(base),
        point,
        resamples,
    )


def resampled_median(values: list[float], rng: random.Random) -> Callable[[], float]:
    """A sampler of ``statistics.median(rng.choices(values, k=n))``'s distribution, O(1) per draw.

    See the module docstring: the k-th smallest of a resample is ``ordered[floor(n · U₍ₖ₎)]``.
    """
    ordered = sorted(values)
    n = len(ordered)

    def at(u: float) -> float:
        return ordered[min(int(u * n), n - 1)]

    if n % 2:
        k = (n + 1) // 2
        return lambda: at(rng.betavariate(k, n - k + 1))
    k = n // 2

    def draw() -> float:
        low = rng.betavariate(k, n - k + 1)
        high = low + (1.0 - low) * (1.0 - rng.random() ** (1.0 / (n - k)))
        return (at(low) + at(high)) / 2

    return draw
