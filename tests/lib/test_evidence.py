"""Costs judged on their own arms' checks, the run's badge and the short-run rule (pure: no database)."""

from __future__ import annotations

import pytest

from portal.lib.report import evidence, report
from portal.lib.stats import hdr
from portal.lib.validity.verdict import finding, result


def encoded(values: list[int]) -> str:
    h = hdr.new_histogram()
    for v in values:
        h.record_value(v)
    return h.encode().decode("ascii")


def cost(name: str, arm: str, base: str, metric: str = "ttlb_p50_us") -> dict:
    return {"name": name, "arm": arm, "base": base, "metric": metric, "verdict": "noticeable"}


COSTS = [
    cost("keepalive_tls", "tls", "plain"),
    cost("new_connection_tls", "tls_new", "plain"),
    cost("resumption_saving", "tls_new", "tls_resumed"),
]


def by_name(costs: list[dict]) -> dict[str, dict]:
    return {c["name"]: c for c in costs}


def test_a_failed_check_voids_only_the_costs_of_its_arms():
    checks = [
        result(
            "tls_sessions",
            "fail",
            "…",
            findings=[
                finding(["tls_resumed"], "fail", "tls_resumed did not resume — 0 of 4,210 handshakes resumed")
            ],
        ),
        result("drift", "warn", "…", findings=[finding(["tls"], "warn", "tls: TTLB p50 1000 → 1320 (+32%)")]),
    ]
    judged = by_name(evidence.judge_costs(COSTS, checks, {}))
    resumption = judged["resumption_saving"]
    assert resumption["verdict"] is None
    assert (
        resumption["not_judged"]
        == "tls_resumed did not resume — 0 of 4,210 handshakes resumed (tls_sessions)"
    )
    keepalive = judged["keepalive_tls"]
    assert keepalive["verdict"] == "noticeable" and keepalive["not_judged"] is None
    assert keepalive["warnings"] == [{"check": "drift", "reason": "tls: TTLB p50 1000 → 1320 (+32%)"}]
    assert (
        judged["new_connection_tls"]["warnings"] == []
        and judged["new_connection_tls"]["verdict"] == "noticeable"
    )


def test_a_pair_finding_voids_that_pair_only_and_an_invalid_arm_voids_all_its_costs():
    checks = [
        result("same_content", "fail", "…", findings=[finding(["tls", "plain"], "fail", "tls vs plain — …")])
    ]
    judged = by_name(evidence.judge_costs(COSTS, checks, {"tls_new": "75% of 4,000 attempts failed"}))
    assert (
        judged["keepalive_tls"]["verdict"] is None and "tls vs plain" in judged["keepalive_tls"]["not_judged"]
    )
    for name in ("new_connection_tls", "resumption_saving"):
        assert judged[name]["verdict"] is None
        assert judged[name]["not_judged"] == "tls_new is invalid: 75% of 4,000 attempts failed"


def test_counts_and_badges():
    checks = [result("a", s, "") for s in ("pass", "pass", "warn", "fail", "skip")]
    counts = evidence.check_counts(checks)
    assert counts == {"pass": 2, "warn": 1, "fail": 1, "skip": 1}
    bad = evidence.status_badge("succeeded", counts, [])
    assert (bad["label"], bad["level"]) == ("with 1 failed check and 1 warning", "bad")
    warn = evidence.status_badge("succeeded", {"pass": 9, "warn": 2, "fail": 0, "skip": 0})
    assert (warn["label"], warn["level"]) == ("with 2 warnings", "warn")
    invalid = evidence.status_badge("succeeded", {"pass": 9, "warn": 0, "fail": 2, "skip": 0}, ["tls_new"])
    assert invalid["label"] == "with 1 invalid arm (tls_new) and 2 failed checks"
    clean = evidence.status_badge("succeeded", {"pass": 9, "warn": 0, "fail": 0, "skip": 2})
    assert (clean["label"], clean["level"]) == ("9 checks passed, 2 not judged", "ok")
    assert evidence.status_badge("running", counts) is None
    # Nothing judged (a run its preflight stopped, no arm): no badge, not "all 0 checks passed".
    assert evidence.status_badge("failed", evidence.check_counts([])) is None
    # Summaries stored before the counts were kept still give the badge, from each check's status.
    old = evidence.summary_badge("succeeded", {"validity": {"a": "pass", "b": "warn", "c": "warn"}})
    assert old["label"] == "with 2 warnings"
    assert evidence.summary_badge("succeeded", {}) is None


def test_a_failed_run_says_why_first_then_what_its_checks_found():
    counts = {"pass": 9, "warn": 0, "fail": 0, "skip": 3}
    reason = "no arm measured the page: 404 × 1,200 on every arm"
    badge = evidence.status_badge("failed", counts, [])
    assert badge["label"] == "9 checks passed, 3 not judged"
    said = evidence.status_text("failed", reason, badge)
    assert said == f"failed: {reason} · 9 checks passed, 3 not judged"
    invalid = evidence.status_badge("failed", {**counts, "fail": 1}, ["plain", "tls"])
    assert evidence.status_text("failed", reason, invalid) == (
        f"failed: {reason} · 2 invalid arms (plain, tls) and 1 failed check"
    )
    # Stopped before measuring: no arm, nothing judged, the reason alone.
    assert evidence.status_text("failed", "target unreachable: connection refused", None) == (
        "failed: target unreachable: connection refused"
    )
    # A run with some invalid arms keeps its status and the badge after it.
    some = evidence.status_badge("succeeded", counts, ["tls_new"])
    assert evidence.status_text("succeeded", "", some) == "succeeded with 1 invalid arm (tls_new)"
    assert evidence.status_text("succeeded", "", evidence.status_badge("succeeded", counts)) == (
        "succeeded 9 checks passed, 3 not judged"
    )
    assert evidence.status_text("cancelled", "Cancelled by the user.", None) == "cancelled"


def test_the_reason_is_the_first_line_of_the_error_in_lower_case():
    error = "Timed out after 300 s; the engine was stopped. Kept 2 finished arm(s).\nTraceback: …"
    assert evidence.failure_reason("failed", error) == (
        "timed out after 300 s; the engine was stopped. Kept 2 finished arm(s)"
    )
    assert evidence.failure_reason("failed", "TLS verification failed.") == "TLS verification failed"
    blank_first = "\n  internal error: KeyError: 'x'\n"
    assert evidence.failure_reason("failed", blank_first) == "internal error: KeyError: 'x'"
    assert evidence.failure_reason("failed", "") == ""
    assert evidence.failure_reason("succeeded", "anything") == ""


@pytest.mark.parametrize(
    ("duration_s", "rounds", "short"),
    [
        (4.9, 1, True),
        (5, 1, False),
        (2, 2, True),
        (3, 2, False),
        (1, 3, False),
        (10, 1, False),
        (None, 1, False),
    ],
)
def test_too_short_for_intervals(duration_s, rounds, short):
    # 5 whole seconds per arm over all rounds (the per-second series), or 3 rounds.
    assert evidence.too_short_for_intervals(duration_s, rounds) is short


def row(name: str, values: list[int], **extra) -> dict:
    return {
        "arm": name,
        "url": f"https://h/{name}",
        "requests": len(values),
        "failures": 0,
        "duration_s": 10.0,
        "rps": len(values) / 10,
        "hist": {"ttfb_us": encoded([v // 2 for v in values]), "ttlb_us": encoded(values)},
        "status_codes": {"200": len(values)},
        "sizes_by_url": {"/1k": [1024]},
    } | extra


def test_report_withholds_the_resumption_verdict_and_counts_the_checks():
    resumed = row("tls_resumed", [2500] * 300, connections_opened=300, tls_sessions_reused=0)
    rows = [
        row("plain", [400] * 300),
        row("tls", [500] * 300),
        row("tls_new", [3000] * 300, connections_opened=300),
        resumed,
    ]
    data = report.build_report({"id": "x", "status": "succeeded"}, rows)
    costs = {(c["name"], c["metric"]): c for c in data["costs"]}
    assert costs[("resumption_saving", "ttlb_p50_us")]["verdict"] is None
    assert (
        "tls_resumed did not resume — 0 of 300 handshakes resumed"
        in costs[("resumption_saving", "rps")]["not_judged"]
    )
    # Not withheld by the checks: without per-second series it only lacks an interval (no verdict).
    keepalive = costs[("keepalive_tls", "ttlb_p50_us")]
    assert keepalive["not_judged"] is None and keepalive["unconfirmed"] and keepalive["verdict"] is None
    assert "session resumption: not judged" in data["headline"] and "saves" not in data["headline"]
    checks = data["run"]["checks"]
    assert checks["fail"] == 1 and sum(checks.values()) == len(data["validity"])
    assert data["arms"]["tls_resumed"]["invalid"] is None and data["run"]["invalid_arms"] == {}
