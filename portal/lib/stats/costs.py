"""Derived TLS costs: arm minus base for a few metrics, each with a 95% bootstrap CI and a verdict.

Pure functions over plain data (one ``ArmInput`` per arm, built by ``portal.lib.report.report``), so this
module is tested without a database and recomputed on every read.

Costs (``COSTS``), each produced only when both of its arms are present with samples (a TTLB summary
with a non-zero count):

- ``keepalive_tls``: ``tls`` − ``plain`` (TLS on an already open connection: record encryption);
- ``new_connection_tls``: ``tls_new`` − ``plain`` (a new TCP connection with a full TLS handshake per
  request against plain keep-alive: what a client without connection reuse pays, TCP connect
  included; the default three arms answer it, ``plain_new`` isolates the handshake);
- ``handshake``: ``tls_new`` − ``plain_new`` (a full TLS handshake, TCP connect netted out);
- ``resumption_saving``: ``tls_new`` − ``tls_resumed`` (positive: resumption saves that much);
- ``client_certificate``: ``tls_mtls`` − ``tls_new`` (asking for and checking a client certificate);
- HTTP/2 (either way, ``verdicts.TWO_SIDED``): h2 − tls, h2 − plain, h2_new − tls_new; h2 − h2c (TLS).
- HTTP/3 (QUIC; either way): ``h3_vs_h2`` h3 − h2 and ``h3_vs_tls`` h3 − tls (warm connections),
  ``h3_new_vs_h2_new`` h3_new − h2_new and ``h3_new_vs_tls_new`` h3_new − tls_new (a new connection
  per request: QUIC's one round trip against TCP + TLS 1.3's two); and, read as savings like
  ``resumption_saving`` (positive: the second arm is quicker), ``h3_resumption_saving`` h3_new −
  h3_resumed (what resuming a QUIC session saves) and ``h3_0rtt_saving`` h3_resumed − h3_0rtt (what
  sending the request as 0-RTT early data saves). ``h3_0rtt`` is judged only when every one of its
  connections was accepted as 0-RTT: a refused one voids its costs (validity check ``http3``).

Metrics (``METRICS``): ``ttlb_p50_us``, ``ttlb_p95_us``, ``ttfb_p50_us`` (µs, whole numbers) and
``rps`` (requests/s, 3 decimals; arm − base, so a TLS cost shows as a negative delta). The point
estimate comes from the arms' exact merged HDR histograms (``portal.lib.stats.hdr.summary``) and their
whole-window throughput; ``delta_pct`` = 100 · delta / base value, to 0.1.

Confidence interval (95%, percentile bootstrap with ``random.Random(seed)``, so a report reads the
same every time; each cost × metric starts its own generator from ``seed``, so one CI does not
depend on which other costs are present):

- ``"rounds"`` when both arms have at least ``MIN_ROUNDS`` rounds with a value for the metric:
  rounds are paired by round number (arm round *i* against base round *i*; rounds interleave the
  arms, so drift of the target between rounds cancels out in each pair) and the statistic is the
  mean of the per-round differences;
- ``"per_second"`` otherwise, when both arms have at least ``MIN_SECONDS`` per-second points with a
  value: each arm's seconds are resampled independently and the statistic is
  median(arm seconds) − median(base seconds), over the seconds' own TTLB p50 (``p50_us``), TTLB
  p95 (``p95_us``), TTFB p50 (``ttfb_p50_us``) or request count (``requests``). Seconds without
  samples are skipped. Series recorded before the engine kept TTFB per second have no
  ``ttfb_p50_us``: their TTFB costs get no CI below ``MIN_ROUNDS`` rounds (there is no sound way to
  borrow the spread from TTLB: the two differ by the transfer time, whose spread is unknown);
- ``"none"`` (``ci95`` null) otherwise.

The median of a resample is drawn from its exact bootstrap distribution, O(1) per draw
(``portal.lib.stats.bootstrap``).

The interval is the 2.5th and 97.5th percentile of the resampled statistics (linear interpolation
between order statistics), then shifted by (point delta − statistic on the original data). The
statistic the bootstrap can resample (mean of round differences, difference of per-second medians)
is a different estimator from the exact pooled percentile of the merged histogram: the bootstrap
measures the spread, the histogram the location, so the interval is re-centred on the shown delta.

``samples`` counts the units that were resampled per arm: paired rounds (the same number for both
arms) for ``"rounds"``, seconds with a value for ``"per_second"``; for ``"none"``, the number of
requests behind the point estimate (the count of the metric's histogram; TTLB's for ``rps``).

Verdict, on |``delta_pct``| as shown (rounded to 0.1), thresholds ``VERDICT_THRESHOLDS_PCT``, and
only with an interval: a cost without one (``ci95`` null) gets no size verdict (``verdict`` null)
and says why in ``unconfirmed`` (``UNCONFIRMED``: too few seconds or rounds) — no verdict without
its interval;

- ``negligible`` when |delta_pct| < 5, or when the CI contains 0 (no evidence of a difference,
  however large it looks);
- ``noticeable`` when 5 ≤ |delta_pct| < 25;
- ``significant`` when |delta_pct| ≥ 25 (its sign, and how it is said: ``portal.lib.stats.verdicts``).

When ``delta_pct`` is null (the base value is 0, so a relative size is undefined): ``negligible``
when the delta is 0 or the CI contains 0, otherwise ``noticeable`` — a real difference whose size
cannot be judged against the base, so it is flagged but not called significant.

A metric whose point estimate is missing on either side (no TTFB histogram) is left out of that
cost; ``ttlb_p50_us`` is always there when the cost is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

from portal.lib.stats.bootstrap import bootstrap_mean as _bootstrap_mean
from portal.lib.stats.bootstrap import bootstrap_median_diff as _bootstrap_median_diff
from portal.lib.stats.bootstrap import rng as _rng

VERDICT_THRESHOLDS_PCT = (5.0, 25.0)
NEGLIGIBLE, NOTICEABLE, SIGNIFICANT = "negligible", "noticeable", "significant"
MIN_ROUNDS = 3
MIN_SECONDS = 5
# Why a cost without an interval has no size verdict (its ``unconfirmed``), said wherever it is shown.
UNCONFIRMED = (
    f"too few seconds/rounds for an interval — measure ≥ {MIN_SECONDS} s per arm or {MIN_ROUNDS} rounds"
)
RESAMPLES = 2000
SEED = 20261122

# (name, arm, base): delta = arm − base.
COSTS = (
    ("keepalive_tls", "tls", "plain"),
    ("new_connection_tls", "tls_new", "plain"),
    ("handshake", "tls_new", "plain_new"),
    ("resumption_saving", "tls_new", "tls_resumed"),
    ("client_certificate", "tls_mtls", "tls_new"),
    *(("h2_vs_tls", "h2", "tls"), ("h2_vs_plain", "h2", "plain")),
    *(("h2_new_vs_tls_new", "h2_new", "tls_new"), ("h2_tls", "h2", "h2c")),
    *(("h3_vs_h2", "h3", "h2"), ("h3_vs_tls", "h3", "tls")),
    *(("h3_new_vs_h2_new", "h3_new", "h2_new"), ("h3_new_vs_tls_new", "h3_new", "tls_new")),
    *(("h3_resumption_saving", "h3_new", "h3_resumed"), ("h3_0rtt_saving", "h3_resumed", "h3_0rtt")),
)


class Summary(TypedDict):
    """``portal.lib.stats.hdr.summary()`` output, µs."""

    p50: int
    p90: int
    p95: int
    p99: int
    min: int
    max: int
    mean: float
    count: int


class ArmInput(TypedDict):
    """One arm, rounds merged (``portal.lib.report.report.build_report`` builds it from the arm's section).

    ``ttlb_us`` / ``ttfb_us``: summaries of the merged histograms (None: nothing recorded).
    ``rps``: whole-window requests/s.
    ``series``: per-second points, concatenated over rounds, each with ``requests`` (int) and that
    second's TTLB ``p50_us`` / ``p95_us`` and TTFB ``ttfb_p50_us`` (None or absent when the second had
    no samples); other keys ignored.
    ``rounds``: each round's own ``ttlb_p50_us``, ``ttlb_p95_us``, ``ttfb_p50_us``, ``rps`` (None
    allowed) and, optionally, its ``round`` number (the pairing key; list position otherwise).
    """

    ttlb_us: Summary | None
    ttfb_us: Summary | None
    rps: float
    series: NotRequired[list[dict]]
    rounds: NotRequired[list[dict]]


class Metric(TypedDict):
    summary: str | None  # key of the summary in ArmInput; None: the arm's rps
    percentile: str | None  # key inside that summary
    series: str | None  # key of a per-second point; None: the series lacks it
    round: str  # key of a round's figures
    ndigits: int | None  # rounding of values, delta and CI ends (None: whole number)
    value: NotRequired[str]  # key of a plain value in ArmInput (instead of a summary or rps)


METRICS: dict[str, Metric] = {
    "ttlb_p50_us": {
        "summary": "ttlb_us",
        "percentile": "p50",
        "series": "p50_us",
        "round": "ttlb_p50_us",
        "ndigits": None,
    },
    "ttlb_p95_us": {
        "summary": "ttlb_us",
        "percentile": "p95",
        "series": "p95_us",
        "round": "ttlb_p95_us",
        "ndigits": None,
    },
    "ttfb_p50_us": {
        "summary": "ttfb_us",
        "percentile": "p50",
        "series": "ttfb_p50_us",
        "round": "ttfb_p50_us",
        "ndigits": None,
    },
    "rps": {"summary": None, "percentile": None, "series": "requests", "round": "rps", "ndigits": 3},
    # Server CPU per request (from a server probe); absent arms without a probe make no entry.
    "server_cpu_ms_per_req": {
        "summary": None,
        "percentile": None,
        "series": None,
        "round": "server_cpu_ms_per_req",
        "ndigits": 6,
        "value": "server_cpu_ms_per_req",
    },
}


def compute_costs(arms: dict[str, ArmInput], *, resamples: int = RESAMPLES, seed: int = SEED) -> list[dict]:
    """Every cost whose two arms are present with samples, in ``COSTS`` × ``METRICS`` order.

    Each entry: ``{"name", "arm", "base", "metric", "arm_value", "base_value", "delta",
    "delta_pct", "ci95": [lo, hi] | None, "ci_method": "rounds" | "per_second" | "none",
    "samples": {"arm": n, "base": n}, "verdict", "unconfirmed"}`` (see the module docstring for each
    field; ``verdict`` null and ``unconfirmed`` the reason when there is no interval).
    """
    out: list[dict] = []
    for name, arm_name, base_name in COSTS:
        arm, base = arms.get(arm_name), arms.get(base_name)
        if arm is None or base is None or not (_has_samples(arm) and _has_samples(base)):
            continue
        for metric in METRICS:
            entry = _cost_entry(name, arm_name, base_name, metric, arm, base, resamples, seed)
            if entry is not None:
                out.append(entry)
    return out


def compare(
    name: str, arm_name: str, base_name: str, arms: dict[str, ArmInput], metric: str = "ttlb_p50_us"
) -> dict | None:
    """One cost entry (as in ``compute_costs``) for any two arms, e.g. two sub-arms of the TLS matrix
    (``portal.lib.tls.advice``); None when either lacks samples or the metric."""
    arm, base = arms.get(arm_name), arms.get(base_name)
    if arm is None or base is None or not (_has_samples(arm) and _has_samples(base)):
        return None
    return _cost_entry(name, arm_name, base_name, metric, arm, base, RESAMPLES, SEED)


def compared_pairs(arm_names: list[str], base: str = "plain") -> list[tuple[str, str]]:
    """The (arm, base) pairs a report compares among ``arm_names``: each cost's two arms, then every
    other arm against ``base`` (the per-arm deltas), each pair once."""
    pairs: list[tuple[str, str]] = []
    candidates = [(arm, of) for _, arm, of in COSTS] + [(name, base) for name in arm_names if name != base]
    for arm, of in candidates:
        if arm in arm_names and of in arm_names and (arm, of) not in pairs and (of, arm) not in pairs:
            pairs.append((arm, of))
    return pairs


def headline_costs(costs: list[dict]) -> list[dict]:
    """The ``ttlb_p50_us`` entry of each cost, in order (the page's headline)."""
    return [entry for entry in costs if entry["metric"] == "ttlb_p50_us"]


def verdict(delta: float | None, delta_pct: float | None, ci95: Sequence[float] | None) -> str | None:
    """The verdict word for one entry (rules in the module docstring); None without an interval."""
    if ci95 is None:
        return None
    if ci95[0] <= 0 <= ci95[1]:
        return NEGLIGIBLE
    if delta_pct is None:
        return NOTICEABLE if delta else NEGLIGIBLE
    low, high = VERDICT_THRESHOLDS_PCT
    size = abs(delta_pct)
    if size < low:
        return NEGLIGIBLE
    if size < high:
        return NOTICEABLE
    return SIGNIFICANT


def _has_samples(arm: ArmInput) -> bool:
    ttlb = arm.get("ttlb_us")
    return bool(ttlb and ttlb.get("count"))


def _point(arm: ArmInput, metric: Metric) -> float | None:
    if metric.get("value"):
        return arm.get(metric["value"])
    if metric["summary"] is None:
        return arm.get("rps")
    summary = arm.get(metric["summary"])
    if not summary or metric["percentile"] is None:
        return None
    return summary.get(metric["percentile"])


def _request_count(arm: ArmInput, metric: Metric) -> int:
    summary = arm.get(metric["summary"] or "ttlb_us")
    return int(summary.get("count") or 0) if summary else 0


def _rounded(value: float, ndigits: int | None) -> float:
    return round(value) if ndigits is None else round(value, ndigits)


def _cost_entry(
    name: str,
    arm_name: str,
    base_name: str,
    metric_name: str,
    arm: ArmInput,
    base: ArmInput,
    resamples: int,
    seed: int,
) -> dict | None:
    metric = METRICS[metric_name]
    arm_value, base_value = _point(arm, metric), _point(base, metric)
    if arm_value is None or base_value is None:
        return None
    ndigits = metric["ndigits"]
    raw_delta = arm_value - base_value
    delta = _rounded(raw_delta, ndigits)
    delta_pct = round(100.0 * raw_delta / base_value, 1) if base_value else None

    method = "none"
    samples = {"arm": _request_count(arm, metric), "base": _request_count(base, metric)}
    interval: tuple[float, float] | None = None
    pairs = _paired_rounds(arm.get("rounds") or [], base.get("rounds") or [], metric["round"])
    arm_seconds = _seconds(arm.get("series") or [], metric["series"])
    base_seconds = _seconds(base.get("series") or [], metric["series"])
    if len(pairs) >= MIN_ROUNDS:
        method = "rounds"
        diffs = [a - b for a, b in pairs]
        samples = {"arm": len(diffs), "base": len(diffs)}
        interval = _bootstrap_mean(diffs, raw_delta, resamples, _rng(seed))
    elif len(arm_seconds) >= MIN_SECONDS and len(base_seconds) >= MIN_SECONDS:
        method = "per_second"
        samples = {"arm": len(arm_seconds), "base": len(base_seconds)}
        interval = _bootstrap_median_diff(arm_seconds, base_seconds, raw_delta, resamples, _rng(seed))
    ci95 = None if interval is None else [_rounded(interval[0], ndigits), _rounded(interval[1], ndigits)]

    return {
        "name": name,
        "arm": arm_name,
        "base": base_name,
        "metric": metric_name,
        "arm_value": _rounded(arm_value, ndigits),
        "base_value": _rounded(base_value, ndigits),
        "delta": delta,
        "delta_pct": delta_pct,
        "ci95": ci95,
        "ci_method": method,
        "samples": samples,
        "verdict": verdict(delta, delta_pct, ci95),
        "unconfirmed": None if ci95 is not None else UNCONFIRMED,
    }


def _paired_rounds(arm_rounds: list[dict], base_rounds: list[dict], key: str) -> list[tuple[float, float]]:
    """(arm, base) values of the rounds both arms have a value for, paired by round number."""

    def by_round(rounds: list[dict]) -> dict[int, float]:
        out: dict[int, float] = {}
        for index, figures in enumerate(rounds):
            value = figures.get(key)
            if value is not None:
                out[figures.get("round", index)] = value
        return out

    mine, theirs = by_round(arm_rounds), by_round(base_rounds)
    return [(mine[r], theirs[r]) for r in sorted(mine) if r in theirs]


def _seconds(series: list[dict], key: str | None) -> list[float]:
    if key is None:
        return []
    return [point[key] for point in series if point.get(key) is not None]
