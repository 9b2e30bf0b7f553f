"""Derived TLS costs with hand-checked numbers (pure: no database)."""

from __future__ import annotations

import random
import statistics

import pytest

from portal.lib.stats import bootstrap, costs


def summary(p50: int, p95: int | None = None, count: int = 1000) -> dict:
    p95 = p50 * 2 if p95 is None else p95
    return {"p50": p50, "p90": p95, "p95": p95, "p99": p95, "min": 1, "max": p95, "mean": p50, "count": count}


def arm(
    ttlb: tuple[int, int] | None = (400, 800),
    ttfb: int | None = 200,
    rps: float = 1000.0,
    series: list[dict] | None = None,
    rounds: list[dict] | None = None,
    count: int = 1000,
    ttfb_count: int | None = None,
) -> dict:
    return {
        "ttlb_us": summary(*ttlb, count=count) if ttlb else None,
        "ttfb_us": summary(ttfb, count=count if ttfb_count is None else ttfb_count) if ttfb else None,
        "rps": rps,
        "series": series or [],
        "rounds": rounds or [{"ttlb_p50_us": None, "ttlb_p95_us": None, "ttfb_p50_us": None, "rps": None}],
    }


def seconds(
    p50s: list[int | None],
    p95s: list[int | None] | None = None,
    requests: list[int] | None = None,
    ttfb: list[int | None] | None = None,
):
    p95s = p95s or [None if v is None else 2 * v for v in p50s]
    requests = requests or [0 if v is None else 1000 for v in p50s]
    points = [
        {"requests": n, "p50_us": a, "p95_us": b, "failures": 0}
        for a, b, n in zip(p50s, p95s, requests, strict=True)
    ]
    for point, value in zip(points, ttfb or [], strict=False):
        point["ttfb_p50_us"] = value
    return points


def rounds(ttlb_p50: list[int | None], rps: list[float | None] | None = None) -> list[dict]:
    rps = rps or [None] * len(ttlb_p50)
    return [
        {
            "round": i,
            "ttlb_p50_us": v,
            "ttlb_p95_us": None if v is None else 2 * v,
            "ttfb_p50_us": v,
            "rps": r,
        }
        for i, (v, r) in enumerate(zip(ttlb_p50, rps, strict=True))
    ]


def entry(result: list[dict], name: str, metric: str) -> dict:
    (found,) = [e for e in result if e["name"] == name and e["metric"] == metric]
    return found


# --- point estimates, shape, presence -------------------------------------------------------------


def test_point_deltas_are_exact_and_the_shape_is_fixed():
    plain = arm(ttlb=(400, 800), ttfb=200, rps=1000.0, ttfb_count=900)
    tls = arm(ttlb=(500, 880), ttfb=210, rps=912.3456, count=1100)
    result = costs.compute_costs({"plain": plain, "tls": tls})
    assert [e["metric"] for e in result] == ["ttlb_p50_us", "ttlb_p95_us", "ttfb_p50_us", "rps"]
    assert entry(result, "keepalive_tls", "ttlb_p50_us") == {
        "name": "keepalive_tls",
        "arm": "tls",
        "base": "plain",
        "metric": "ttlb_p50_us",
        "arm_value": 500,
        "base_value": 400,
        "delta": 100,
        "delta_pct": 25.0,
        "ci95": None,
        "ci_method": "none",
        "samples": {"arm": 1100, "base": 1000},  # request counts when there is no CI
        # No verdict without an interval: the size is stated, never judged.
        "verdict": None,
        "unconfirmed": costs.UNCONFIRMED,
    }
    assert costs.UNCONFIRMED == ("too few seconds/rounds for an interval — measure ≥ 5 s per arm or 3 rounds")
    p95 = entry(result, "keepalive_tls", "ttlb_p95_us")
    assert (p95["delta"], p95["delta_pct"], p95["verdict"]) == (80, 10.0, None)
    ttfb = entry(result, "keepalive_tls", "ttfb_p50_us")
    assert (ttfb["delta"], ttfb["delta_pct"], ttfb["verdict"]) == (10, 5.0, None)
    assert ttfb["samples"] == {"arm": 1100, "base": 900}  # the TTFB histogram's own count
    rps = entry(result, "keepalive_tls", "rps")
    assert (rps["arm_value"], rps["base_value"], rps["delta"], rps["delta_pct"]) == (
        912.346,
        1000.0,
        -87.654,
        -8.8,
    )
    assert rps["verdict"] is None and rps["unconfirmed"] == costs.UNCONFIRMED


def test_all_costs_in_order_when_every_arm_ran():
    arms = {
        "plain": arm(ttlb=(400, 800)),
        "plain_new": arm(ttlb=(900, 1800)),
        "tls": arm(ttlb=(420, 840)),
        "tls_new": arm(ttlb=(3000, 6000)),
        "tls_resumed": arm(ttlb=(1500, 3000)),
    }
    result = costs.compute_costs(arms)
    assert [(e["name"], e["arm"], e["base"]) for e in result[::4]] == [
        ("keepalive_tls", "tls", "plain"),
        ("new_connection_tls", "tls_new", "plain"),
        ("handshake", "tls_new", "plain_new"),
        ("resumption_saving", "tls_new", "tls_resumed"),
    ]
    assert len(result) == 16
    assert [e["delta"] for e in costs.headline_costs(result)] == [20, 2600, 2100, 1500]
    assert [e["delta_pct"] for e in costs.headline_costs(result)] == [5.0, 650.0, 233.3, 100.0]
    assert [e["metric"] for e in costs.headline_costs(result)] == ["ttlb_p50_us"] * 4


def test_missing_arm_means_no_cost():
    result = costs.compute_costs({"plain": arm(), "tls": arm(), "plain_new": arm()})
    assert {e["name"] for e in result} == {"keepalive_tls"}
    assert costs.compute_costs({"tls": arm(), "tls_new": arm()}) == []
    assert costs.compute_costs({}) == []


def test_arm_without_samples_means_no_cost():
    empty = arm(ttlb=None, ttfb=None, rps=0.0)
    assert costs.compute_costs({"plain": arm(), "tls": empty}) == []
    zero = arm()
    zero["ttlb_us"]["count"] = 0
    assert costs.compute_costs({"plain": zero, "tls": arm()}) == []


def test_no_resumed_arm_means_no_resumption_saving():
    arms = {"plain": arm(), "plain_new": arm(), "tls": arm(), "tls_new": arm()}
    assert [e["name"] for e in costs.compute_costs(arms)[::4]] == [
        "keepalive_tls",
        "new_connection_tls",
        "handshake",
    ]


def test_the_default_three_arms_answer_what_a_new_tls_connection_costs():
    # plain, tls, tls_new (no plain_new): tls_new − plain, TCP connect included.
    arms = {"plain": arm(ttlb=(400, 800)), "tls": arm(ttlb=(420, 840)), "tls_new": arm(ttlb=(3000, 6000))}
    result = costs.compute_costs(arms)
    assert [e["name"] for e in costs.headline_costs(result)] == ["keepalive_tls", "new_connection_tls"]
    new = entry(result, "new_connection_tls", "ttlb_p50_us")
    assert (new["arm"], new["base"], new["delta"], new["delta_pct"]) == ("tls_new", "plain", 2600, 650.0)
    assert {e["metric"] for e in result if e["name"] == "new_connection_tls"} == {
        "ttlb_p50_us",
        "ttlb_p95_us",
        "ttfb_p50_us",
        "rps",
    }


def test_resumption_saving_is_new_minus_resumed():
    arms = {"tls_new": arm(ttlb=(3000, 6000)), "tls_resumed": arm(ttlb=(1800, 3600))}
    saving = entry(costs.compute_costs(arms), "resumption_saving", "ttlb_p50_us")
    assert (saving["arm"], saving["base"], saving["delta"], saving["delta_pct"]) == (
        "tls_new",
        "tls_resumed",
        1200,
        66.7,
    )


def test_metric_without_a_histogram_is_left_out():
    result = costs.compute_costs({"plain": arm(ttfb=None), "tls": arm()})
    assert [e["metric"] for e in result] == ["ttlb_p50_us", "ttlb_p95_us", "rps"]


def test_zero_base_has_no_pct():
    result = costs.compute_costs({"plain": arm(rps=0.0), "tls": arm(rps=5.0)})
    rps = entry(result, "keepalive_tls", "rps")
    assert (rps["delta"], rps["delta_pct"], rps["verdict"]) == (5.0, None, None)  # and no interval
    assert costs.verdict(5.0, None, [1.0, 9.0]) == "noticeable"


# --- per-second bootstrap -------------------------------------------------------------------------


def test_constant_seconds_give_a_zero_width_ci_on_the_point_delta():
    # Per-second medians differ by 100 µs, the exact histograms by 120: the CI sits on 120.
    plain = arm(ttlb=(400, 800), rps=1000.25, series=seconds([400] * 6, requests=[900] * 6))
    tls = arm(ttlb=(520, 1000), rps=950.5, series=seconds([500] * 6, requests=[1000] * 6))
    result = costs.compute_costs({"plain": plain, "tls": tls})
    p50 = entry(result, "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"], p50["samples"]) == (
        [120, 120],
        "per_second",
        {"arm": 6, "base": 6},
    )
    assert (p50["delta_pct"], p50["verdict"]) == (30.0, "significant")
    p95 = entry(result, "keepalive_tls", "ttlb_p95_us")
    assert (p95["delta"], p95["ci95"]) == (200, [200, 200])
    rps = entry(result, "keepalive_tls", "rps")
    assert (rps["delta"], rps["ci95"], rps["ci_method"]) == (-49.75, [-49.75, -49.75], "per_second")
    ttfb = entry(result, "keepalive_tls", "ttfb_p50_us")
    assert (ttfb["ci95"], ttfb["ci_method"]) == (None, "none")  # a series stored without TTFB


def test_ttfb_gets_a_per_second_interval_from_the_series():
    # The engine's per-second points carry ttfb_p50_us: TTFB costs get an interval like TTLB's.
    plain = arm(ttfb=200, series=seconds([400] * 6, ttfb=[200, 210, 190, 200, 205, 195]))
    tls = arm(ttfb=260, series=seconds([500] * 6, ttfb=[260, 270, 250, 262, 258, 255]))
    ttfb = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttfb_p50_us")
    assert (ttfb["delta"], ttfb["ci_method"], ttfb["samples"]) == (60, "per_second", {"arm": 6, "base": 6})
    lo, hi = ttfb["ci95"]
    assert lo < 60 < hi and lo > 0  # the spread of the seconds, centred on the exact delta
    assert ttfb["verdict"] == "significant"
    # Seconds without TTFB (no samples that second) are skipped; fewer than five: no interval.
    short = arm(ttfb=260, series=seconds([500] * 6, ttfb=[260, None, None, 262, 258, None]))
    none = entry(costs.compute_costs({"plain": plain, "tls": short}), "keepalive_tls", "ttfb_p50_us")
    assert (none["ci95"], none["ci_method"]) == (None, "none")


def test_ci_straddling_zero_is_negligible_even_with_a_big_pct():
    noisy = [100, 1000] * 5
    plain = arm(ttlb=(400, 800), series=seconds(noisy))
    tls = arm(ttlb=(600, 1200), series=seconds(noisy))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["delta"], p50["delta_pct"], p50["ci_method"]) == (200, 50.0, "per_second")
    lo, hi = p50["ci95"]
    assert lo < 0 < hi
    assert p50["verdict"] == "negligible"


def test_fewer_than_five_seconds_gives_no_ci():
    plain = arm(series=seconds([400, 410, 420, 430]))
    tls = arm(series=seconds([500, 510, 520, 530, 540, 550]))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"], p50["samples"]) == (None, "none", {"arm": 1000, "base": 1000})


def test_empty_seconds_are_skipped_and_five_is_enough():
    plain = arm(series=seconds([400, None, 400, 400, None, 400, 400]))
    tls = arm(ttlb=(500, 1000), series=seconds([500] * 5))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"], p50["samples"]) == (
        [100, 100],
        "per_second",
        {"arm": 5, "base": 5},
    )
    short = arm(series=seconds([400, None, 400, 400, None, 400]))
    p50 = entry(costs.compute_costs({"plain": short, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"]) == (None, "none")


@pytest.mark.parametrize("n", [5, 6, 11, 40])
def test_median_sampler_matches_literal_resampling(n):
    # The O(1) sampler draws from the same distribution as median(rng.choices(values, k=n)).
    values = [random.Random(n).randint(100, 1000) for _ in range(n)]
    fast = bootstrap.resampled_median(values, random.Random(1))
    literal_rng = random.Random(2)
    a = sorted(fast() for _ in range(20000))
    b = sorted(statistics.median(literal_rng.choices(values, k=n)) for _ in range(20000))
    spread = max(values) - min(values)
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        assert abs(bootstrap.percentile(a, q) - bootstrap.percentile(b, q)) <= 0.05 * spread


# --- rounds bootstrap -----------------------------------------------------------------------------


def test_rounds_are_paired():
    # Rounds swing from 800 to 5100 µs, but tls is always exactly 100 µs slower than plain.
    noisy = seconds([100, 1000] * 5)
    plain = arm(ttlb=(2000, 4000), series=noisy, rounds=rounds([1000, 5000, 2000, 800]))
    tls = arm(ttlb=(2100, 4200), series=noisy, rounds=rounds([1100, 5100, 2100, 900]))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"], p50["samples"]) == ([100, 100], "rounds", {"arm": 4, "base": 4})
    assert p50["verdict"] == "noticeable"


def test_rounds_interval_is_shifted_onto_the_point_delta():
    plain = arm(ttlb=(2000, 4000), rounds=rounds([1000, 5000, 2000]))
    # The rounds say 50 µs (TTLB and TTFB alike), the histograms 100 (TTLB) and 10 (TTFB).
    tls = arm(ttlb=(2100, 4200), ttfb=210, rounds=rounds([1050, 5050, 2050]))
    result = costs.compute_costs({"plain": plain, "tls": tls})
    assert entry(result, "keepalive_tls", "ttlb_p50_us")["ci95"] == [100, 100]
    ttfb = entry(result, "keepalive_tls", "ttfb_p50_us")  # TTFB gets a CI from rounds
    assert (ttfb["ci_method"], ttfb["ci95"]) == ("rounds", [10, 10])


def test_rounds_interval_spans_the_resampled_means():
    # Differences 90, 100, 110: resampled means run from 90 to 110, each end with p = 1/27 > 2.5%.
    plain = arm(ttlb=(1000, 2000), rounds=rounds([1000, 1000, 1000]))
    tls = arm(ttlb=(1100, 2200), rounds=rounds([1090, 1100, 1110]))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert p50["ci95"] == [90, 110]


def test_rounds_pair_by_round_number_not_position():
    plain_rounds = rounds([1000, 9999, 3000, 4000])
    del plain_rounds[1]  # plain failed in round 1: its rounds are 0, 2, 3
    plain = arm(ttlb=(3000, 6000), rounds=plain_rounds)
    tls = arm(ttlb=(3100, 6200), rounds=rounds([1100, 2100, 3100, 4100]))
    p50 = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "ttlb_p50_us")
    assert (p50["ci95"], p50["ci_method"], p50["samples"]) == ([100, 100], "rounds", {"arm": 3, "base": 3})


def test_too_few_rounds_with_values_fall_back_to_seconds():
    plain = arm(series=seconds([400] * 5), rounds=rounds([400, None, 400]))
    tls = arm(ttlb=(500, 1000), series=seconds([500] * 5), rounds=rounds([500, 500, 500]))
    result = costs.compute_costs({"plain": plain, "tls": tls})
    assert entry(result, "keepalive_tls", "ttlb_p50_us")["ci_method"] == "per_second"
    ttfb = entry(result, "keepalive_tls", "ttfb_p50_us")
    assert (ttfb["ci_method"], ttfb["ci95"]) == ("none", None)


def test_rps_rounds_ci_keeps_three_decimals():
    plain = arm(rps=1000.0, rounds=rounds([400, 400, 400], rps=[1000.0, 1100.0, 900.0]))
    tls = arm(rps=899.1234, rounds=rounds([500, 500, 500], rps=[900.0, 1000.0, 800.0]))
    rps = entry(costs.compute_costs({"plain": plain, "tls": tls}), "keepalive_tls", "rps")
    assert (rps["arm_value"], rps["delta"], rps["ci95"], rps["ci_method"]) == (
        899.123,
        -100.877,
        [-100.877, -100.877],
        "rounds",
    )


# --- determinism --------------------------------------------------------------------------------


def noisy_arms() -> dict:
    rng = random.Random(42)
    return {
        name: arm(
            ttlb=(base, 2 * base),
            series=seconds(
                [base + rng.randint(-200, 200) for _ in range(30)],
                requests=[rng.randint(800, 1200) for _ in range(30)],
            ),
        )
        for name, base in (("plain", 400), ("tls", 450))
    }


def test_same_seed_same_result():
    first = costs.compute_costs(noisy_arms())
    assert costs.compute_costs(noisy_arms()) == first
    assert costs.compute_costs(noisy_arms(), seed=7) == costs.compute_costs(noisy_arms(), seed=7)
    assert [e["ci95"] for e in costs.compute_costs(noisy_arms(), seed=7)] != [e["ci95"] for e in first]


def test_a_cost_does_not_depend_on_the_other_arms():
    arms = noisy_arms()
    alone = costs.compute_costs(arms)
    arms.update(tls_new=arm(ttlb=(3000, 6000)), plain_new=arm(ttlb=(900, 1800)))
    assert costs.compute_costs(arms)[:4] == alone


# --- verdict --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "pct", "ci", "expected"),
    [
        (1, 4.9, [0.5, 2], "negligible"),
        (1, 5.0, [0.5, 2], "noticeable"),
        (-1, -5.0, [-2, -0.5], "noticeable"),
        (1, 24.9, [0.5, 2], "noticeable"),
        (1, 25.0, [0.5, 2], "significant"),
        (-1, -25.0, [-2, -0.5], "significant"),
        # No interval, no verdict, whatever the size.
        (1, 4.9, None, None),
        (1, 80.0, None, None),
        (0, None, None, None),
        (1, 80.0, [-3, 50], "negligible"),
        (1, 80.0, [0, 50], "negligible"),
        (1, 80.0, [1, 50], "significant"),
        (-1, -80.0, [-50, -1], "significant"),
        (0, None, [0, 0], "negligible"),
        (3, None, [1, 5], "noticeable"),
        (3, None, [-1, 5], "negligible"),
    ],
)
def test_verdict(delta, pct, ci, expected):
    assert costs.verdict(delta, pct, ci) == expected


@pytest.mark.parametrize(("tls_p50", "pct", "expected"), [(419, 4.8, "negligible"), (420, 5.0, "noticeable")])
def test_verdict_boundary_at_5_through_compute(tls_p50, pct, expected):
    # Constant seconds: a zero-width interval on the point delta, so the size alone decides.
    plain = arm(ttlb=(400, 800), series=seconds([400] * 6))
    result = costs.compute_costs(
        {"plain": plain, "tls": arm(ttlb=(tls_p50, 800), series=seconds([tls_p50] * 6))}
    )
    p50 = entry(result, "keepalive_tls", "ttlb_p50_us")
    assert (p50["delta_pct"], p50["verdict"]) == (pct, expected)


@pytest.mark.parametrize(
    ("tls_p50", "pct", "expected"), [(499, 24.8, "noticeable"), (500, 25.0, "significant")]
)
def test_verdict_boundary_at_25_through_compute(tls_p50, pct, expected):
    plain = arm(ttlb=(400, 800), series=seconds([400] * 6))
    result = costs.compute_costs(
        {"plain": plain, "tls": arm(ttlb=(tls_p50, 800), series=seconds([tls_p50] * 6))}
    )
    p50 = entry(result, "keepalive_tls", "ttlb_p50_us")
    assert (p50["delta_pct"], p50["verdict"]) == (pct, expected)


def test_thresholds_are_exported():
    assert costs.VERDICT_THRESHOLDS_PCT == (5.0, 25.0)
