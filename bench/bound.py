"""The engine's overhead bound, judged: within 10 % or 20 µs of a blocking reference client (whichever
allows more), said only when the figures can tell it.

Used by ``bench/generator`` (the 1-user overhead part) and ``bench/client_paired``. A median alone on
a shared 2-core machine moves by more than the bound between minutes, so each verdict carries its
interval: the distribution-free 95 % interval of a median (order statistics, the normal
approximation of the binomial: ranks n/2 ∓ 1.96·√n/2), for the engine's and the reference's medians
(``bench/generator``: two clients, two intervals, the worst and best difference between them) or for
the median of per-pair differences (``bench/client_paired``: one interval). ``within_bound`` is

* ``True`` when even the interval's worst case is within the allowance,
* ``False`` when even its best case is over it,
* ``None`` when the interval straddles the allowance, or fewer than ``MIN_SAMPLES`` samples were
  measured: the bench could not judge (it says so; it never passes a check it could not judge).

``--check`` on either bench turns the verdict into its exit code (``exit_code``): 0 within, 3 over,
4 not judged. Without it a bench exits 0 whenever it measured, so a CI machine's noise never fails a
build; the flag is in the JSON (``within_bound``) and in the printed table either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

BOUND_PCT, BOUND_US = 10.0, 20
Z95 = 1.96
MIN_SAMPLES = 20  # below this the order-statistic interval is not worth the name
EXIT_WITHIN, EXIT_OVER, EXIT_UNJUDGED = 0, 3, 4


def allowance_us(reference_us: float) -> float:
    """How much over the reference's median the engine may be: 10 % of it or 20 µs, whichever is more."""
    return max(BOUND_US, reference_us * BOUND_PCT / 100)


def median_ranks(n: int) -> tuple[int, int] | None:
    """0-based indexes, in ``n`` sorted values, of the ends of the median's 95 % interval (None below
    ``MIN_SAMPLES``)."""
    if n < MIN_SAMPLES:
        return None
    half = Z95 * math.sqrt(n) / 2
    low = max(0, math.floor(n / 2 - half) - 1)
    high = min(n - 1, math.ceil(n / 2 + half))
    return low, high


def median_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % interval of the median of ``values`` (any order), or None with too few."""
    ranks = median_ranks(len(values))
    if ranks is None:
        return None
    ordered = sorted(values)
    return ordered[ranks[0]], ordered[ranks[1]]


def histogram_median_interval(hist) -> tuple[float, float] | None:
    """The same interval from an HdrHistogram (the engine reports its timings as histograms)."""
    n = hist.get_total_count()
    ranks = median_ranks(n)
    if ranks is None:
        return None
    # The value at rank r (0-based) is the one at percentile 100·(r + 1)/n.
    low, high = (hist.get_value_at_percentile(100 * (rank + 1) / n) for rank in ranks)
    return float(low), float(high)


def verdict(worst_extra: float, best_extra: float, allowed: float) -> bool | None:
    if worst_extra <= allowed:
        return True
    if best_extra > allowed:
        return False
    return None


def judge_two(
    engine_p50: float,
    engine_ci: tuple[float, float] | None,
    reference_p50: float,
    reference_ci: tuple[float, float] | None,
) -> dict:
    """Two clients' medians, each with its interval: the engine's extra and whether it is in bound."""
    allowed = allowance_us(reference_p50)
    row = {
        "extra_us": round(engine_p50 - reference_p50, 1),
        "allowed_us": round(allowed, 1),
        "extra_ci95_us": None,
        "within_bound": None,
    }
    if engine_ci and reference_ci:
        best, worst = engine_ci[0] - reference_ci[1], engine_ci[1] - reference_ci[0]
        row["extra_ci95_us"] = [round(best, 1), round(worst, 1)]
        row["within_bound"] = verdict(worst, best, allowed)
    return row


def judge_paired(differences: Sequence[float], reference_p50: float) -> dict:
    """Per-pair differences (engine − reference, the same request slot): their median's interval."""
    allowed = allowance_us(reference_p50)
    ci = median_interval(differences)
    return {
        "allowed_us": round(allowed, 1),
        "diff_ci95_us": [ci[0], ci[1]] if ci else None,
        "within_bound": verdict(ci[1], ci[0], allowed) if ci else None,
    }


def overall(verdicts: Iterable[bool | None]) -> bool | None:
    """False if any verdict is over, else None if any could not be judged, else True."""
    seen = list(verdicts)
    if False in seen:
        return False
    if None in seen or not seen:
        return None
    return True


def exit_code(within: bool | None) -> int:
    return {True: EXIT_WITHIN, False: EXIT_OVER, None: EXIT_UNJUDGED}[within]


def said(within: bool | None) -> str:
    return {True: "within", False: "OVER", None: "not judged"}[within]


def verdict_line(what: str, within: bool | None) -> str:
    """The bench's last table line: the bound and its verdict."""
    return f"{what} {BOUND_PCT:.0f} % / {BOUND_US} µs bound: {said(within)}"
