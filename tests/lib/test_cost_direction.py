"""Verdicts know the sign: every cost with a delta above, below and around zero, as the report JSON
(``direction``, ``unexpected``), the words and colour the pages show (``verdicts.verdict_words``),
the headline, the CSV rows and the budgets say it (pure: no database)."""

from __future__ import annotations

import pytest

from portal.lib.report import budgets, evidence, headline
from portal.lib.stats import costs, verdicts
from portal.runs import exports
from tests.lib.test_costs import arm, seconds

# cost: (arm, base); a run of these two arms alone makes this cost and no other.
PAIRS = {
    "keepalive_tls": ("tls", "plain"),
    "new_connection_tls": ("tls_new", "plain"),
    "handshake": ("tls_new", "plain_new"),
    "resumption_saving": ("tls_new", "tls_resumed"),
}
BASE_US = 3200
# Per second: each arm at its own level, the same ±300 µs wobble (an interval that excludes 0 when
# the arms are 840 µs apart, and contains it when they are 100 µs apart).
WOBBLE = [-300, 300, -200, 200, 0, -100, 100, 0]


def measured(name: str, arm_us: int) -> dict:
    """The ``ttlb_p50_us`` entry of ``name`` when its arm's median is ``arm_us`` and its base's
    ``BASE_US``, each with eight per-second medians around it."""
    arm_name, base_name = PAIRS[name]
    arms = {
        arm_name: arm(ttlb=(arm_us, 2 * arm_us), series=seconds([arm_us + w for w in WOBBLE])),
        base_name: arm(ttlb=(BASE_US, 2 * BASE_US), series=seconds([BASE_US + w for w in WOBBLE[::-1]])),
    }
    judged = evidence.judge_costs(costs.compute_costs(arms), [], {})
    (found,) = [c for c in judged if c["metric"] == "ttlb_p50_us"]
    assert found["name"] == name and found["ci_method"] == "per_second"
    return found


# (cost, arm's median µs, direction, unexpected, label, tone)
CASES = [
    # TLS slower than its control: what TLS costs, as before.
    ("keepalive_tls", 4040, "cost", False, "significant", "significant"),
    ("new_connection_tls", 4040, "cost", False, "significant", "significant"),
    ("handshake", 4040, "cost", False, "significant", "significant"),
    # TLS 0.84 ms (26%) faster than its control: never a red "significant" cost, nor a saving.
    ("keepalive_tls", 2360, "saving", True, "tls faster than plain — check the setup", "unexpected"),
    ("new_connection_tls", 2360, "saving", True, "tls_new faster than plain — check the setup", "unexpected"),
    ("handshake", 2360, "saving", True, "tls_new faster than plain_new — check the setup", "unexpected"),
    # A full handshake slower than a resumed one: what resumption saves, a saving.
    ("resumption_saving", 4040, "saving", False, "significant saving", "saving"),
    # Resumed connections slower than full handshakes: the other way round.
    (
        "resumption_saving",
        2360,
        "cost",
        True,
        "tls_new faster than tls_resumed — check the setup",
        "unexpected",
    ),
    # 100 µs apart in ±300 µs of noise: the interval contains 0, no direction either way.
    ("keepalive_tls", 3100, "none", False, "negligible", "negligible"),
    ("keepalive_tls", 3300, "none", False, "negligible", "negligible"),
    ("new_connection_tls", 3100, "none", False, "negligible", "negligible"),
    ("handshake", 3300, "none", False, "negligible", "negligible"),
    ("resumption_saving", 3100, "none", False, "negligible", "negligible"),
    ("resumption_saving", 3300, "none", False, "negligible", "negligible"),
]


@pytest.mark.parametrize(("name", "arm_us", "direction", "odd", "label", "tone"), CASES)
def test_each_cost_in_each_direction(name, arm_us, direction, odd, label, tone):
    cost = measured(name, arm_us)
    lo, hi = cost["ci95"]
    assert (lo <= 0 <= hi) == (direction == "none")
    assert cost["verdict"] == ("negligible" if direction == "none" else "significant")
    assert (cost["direction"], cost["unexpected"]) == (direction, odd)
    said = verdicts.verdict_words(cost)
    assert (said["label"], said["tone"], said["direction"], said["unexpected"]) == (
        label,
        tone,
        direction,
        odd,
    )
    # A report or summary stored before the direction was kept reads the same.
    old = {k: v for k, v in cost.items() if k not in ("direction", "unexpected", "arm", "base", "metric")}
    assert verdicts.verdict_words(old) == said


def test_the_words_of_the_issue_and_of_a_noticeable_delta():
    # −0.84 ms, −26%: shown in red as "significant" before; no verdict word now, and a reason.
    fast = measured("keepalive_tls", 2360)
    assert (fast["delta"], fast["delta_pct"], fast["verdict"]) == (-840, -26.2, "significant")
    said = verdicts.verdict_words(fast)
    assert said["tone"] == "unexpected" and "significant" not in said["label"]
    assert "should not be faster" in said["title"]
    # −12%: the same words whatever the size, once it is not negligible.
    somewhat = measured("handshake", 2800)
    assert (somewhat["verdict"], somewhat["direction"]) == ("noticeable", "saving")
    assert verdicts.verdict_words(somewhat)["label"] == "tls_new faster than plain_new — check the setup"
    assert verdicts.verdict_words(measured("handshake", 3600))["label"] == "noticeable"
    assert verdicts.verdict_words(measured("resumption_saving", 3600))["label"] == "noticeable saving"


@pytest.mark.parametrize(
    ("metric", "delta", "direction", "label"),
    [
        # Throughput: fewer requests/s is the cost; more is TLS faster than plain.
        ("rps", -100.0, "cost", "noticeable"),
        ("rps", 100.0, "saving", "tls faster than plain — check the setup"),
        # Server CPU: more CPU-ms per request is the cost.
        ("server_cpu_ms_per_req", 0.01, "cost", "noticeable"),
        ("server_cpu_ms_per_req", -0.01, "saving", "tls lighter on server CPU than plain — check the setup"),
    ],
)
def test_metrics_where_lower_is_worse_or_not(metric, delta, direction, label):
    cost = {"name": "keepalive_tls", "arm": "tls", "base": "plain", "metric": metric, "delta": delta}
    cost |= {"delta_pct": 10.0 if delta > 0 else -10.0, "ci95": [delta / 2, delta * 2]}
    cost["ci95"].sort()
    cost["verdict"] = costs.verdict(cost["delta"], cost["delta_pct"], cost["ci95"])
    assert verdicts.direction("keepalive_tls", metric, delta, cost["ci95"]) == direction
    assert verdicts.verdict_words(cost)["label"] == label


def test_a_small_difference_the_other_way_stays_negligible():
    # 3% faster with an interval that excludes 0: a direction, but not worth "check the setup".
    cost = {"name": "keepalive_tls", "metric": "ttlb_p50_us", "delta": -100, "delta_pct": -3.1}
    cost |= {"ci95": [-150, -50], "verdict": "negligible"}
    assert verdicts.direction("keepalive_tls", "ttlb_p50_us", -100, [-150, -50]) == "saving"
    said = verdicts.verdict_words(cost)
    assert (said["label"], said["tone"], said["unexpected"]) == ("negligible", "negligible", False)
    # Without an interval the sign alone gives the direction; a zero delta has none.
    assert verdicts.direction("keepalive_tls", "ttlb_p50_us", 120, None) == "cost"
    assert verdicts.direction("keepalive_tls", "ttlb_p50_us", 0, None) == "none"


def test_a_cost_that_is_not_judged_has_no_direction_either():
    (judged,) = evidence.judge_costs([measured("keepalive_tls", 2360)], [], {"tls": "90% of 1,000 failed"})
    assert (judged["verdict"], judged["direction"], judged["unexpected"]) == (None, None, False)
    said = verdicts.verdict_words(judged)
    assert (said["label"], said["tone"], said["title"]) == (
        "not judged",
        "none",
        "tls is invalid: 90% of 1,000 failed",
    )


@pytest.mark.parametrize(
    ("name", "arm_us", "says", "never"),
    [
        (
            "keepalive_tls",
            2360,
            "TLS on warm (keep-alive) connections: tls answered 0.84 ms faster than plain at the median time "
            "to last byte — check the setup (-26%, 95% CI ",
            ["significant", "adds", "saves"],
        ),
        (
            "handshake",
            2360,
            "A full TLS handshake per request: tls_new answered 0.84 ms faster than plain_new at the median "
            "time to last byte — check the setup (-26%, 95% CI ",
            ["significant", "adds", "saves"],
        ),
        (
            "handshake",
            4040,
            "A full TLS handshake per request adds +0.84 ms median time to last byte (significant, +26%",
            [],
        ),
        (
            "keepalive_tls",
            3300,
            "TLS on warm (keep-alive) connections changes the median time to last byte by +0.10 ms "
            "(negligible, +3%, 95% CI -",
            ["adds"],
        ),
        (
            "keepalive_tls",
            3100,
            "changes the median time to last byte by -0.10 ms (negligible, -3%, 95% CI -",
            ["adds"],
        ),
        (
            "resumption_saving",
            4040,
            "Session resumption saves 0.84 ms per new connection (significant saving, 95% CI +",
            [],
        ),
        (
            "resumption_saving",
            2360,
            "Session resumption saves nothing here: resumed connections took 0.84 ms longer — check the "
            "setup (95% CI -",
            ["significant"],
        ),
        (
            "resumption_saving",
            3300,
            "Session resumption makes no clear difference per new connection: +0.10 ms saved "
            "(negligible, 95% CI -",
            [],
        ),
    ],
)
def test_the_headline_follows_the_direction(name, arm_us, says, never):
    text = headline.headline([measured(name, arm_us)])
    assert says in text, text
    for word in never:
        assert word not in text


def csv_of(cost: dict) -> dict[str, str]:
    data = {"run": {"status": "succeeded"}, "arms": {}, "costs": [cost], "validity": []}
    rows = list(exports.csv_rows("r", data))
    return {row[3]: row[4] for row in rows if row[2] == f"cost:{cost['name']}:{cost['metric']}"}


@pytest.mark.parametrize(("name", "arm_us", "direction", "odd", "label", "tone"), CASES)
def test_csv_rows_carry_the_direction_and_the_words(name, arm_us, direction, odd, label, tone):
    cost = measured(name, arm_us)
    row = csv_of(cost)
    assert (row["verdict"], row["direction"], row["verdict_label"]) == (cost["verdict"], direction, label)
    # A frozen report signed before the direction was kept: derived, the same rows.
    assert csv_of({k: v for k, v in cost.items() if k not in ("direction", "unexpected")}) == row


def test_csv_of_a_cost_not_judged():
    (judged,) = evidence.judge_costs([measured("handshake", 2360)], [], {"plain_new": "stopped early"})
    row = csv_of(judged)
    assert (row["verdict"], row["direction"], row["verdict_label"]) == ("", "", "not judged")


def report_with(*entries: dict) -> dict:
    return {"costs": list(entries), "validity": [{"check": "errors", "status": "pass"}]}


def test_a_budget_passes_a_negative_cost_and_says_it_is_no_cost():
    fast = measured("keepalive_tls", 2360)
    result = budgets.evaluate(report_with(fast), {"keepalive_tls_p50_ms": 2})
    (item,) = result["results"]
    assert (result["status"], item["status"], item["value"]) == ("pass", "pass", -0.84)
    assert item["detail"] == (
        "-0.84 ms ≤ 2 ms (keepalive_tls cost, tls − plain, ttlb_p50_us: tls faster than plain — check "
        "the setup)"
    )
    # Even a limit of 0 passes: the figure is below it.
    assert budgets.evaluate(report_with(fast), {"keepalive_tls_p50_ms": 0})["status"] == "pass"
    # A handshake faster than plain_new, likewise.
    hand = budgets.evaluate(report_with(measured("handshake", 2360)), {"handshake_ms": 1})["results"][0]
    assert hand["status"] == "pass" and hand["detail"].endswith(
        "tls_new faster than plain_new — check the setup)"
    )


def test_a_budget_on_a_negative_value_inside_the_noise_or_a_real_cost_says_nothing_more():
    noise = budgets.evaluate(report_with(measured("keepalive_tls", 3100)), {"keepalive_tls_p50_ms": 2})
    assert noise["results"][0]["detail"] == "-0.1 ms ≤ 2 ms (keepalive_tls cost, tls − plain, ttlb_p50_us)"
    cost = budgets.evaluate(report_with(measured("keepalive_tls", 4040)), {"keepalive_tls_p50_ms": 0.5})
    assert cost["results"][0]["status"] == "fail"
    assert cost["results"][0]["detail"] == "0.84 ms > 0.5 ms (keepalive_tls cost, tls − plain, ttlb_p50_us)"


def test_a_server_cpu_budget_on_tls_lighter_than_plain():
    cpu = {"name": "keepalive_tls", "arm": "tls", "base": "plain", "metric": "server_cpu_ms_per_req"}
    cpu |= {"delta": -0.02, "delta_pct": -40.0, "ci95": [-0.03, -0.01], "verdict": "significant"}
    item = budgets.evaluate(report_with(cpu), {"server_cpu_ms_per_req": 0.05})["results"][0]
    assert item["status"] == "pass"
    assert item["detail"].endswith("server probe: tls lighter on server CPU than plain — check the setup)")
