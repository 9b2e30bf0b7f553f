"""Budgets judged on real reports: runs stored with real histograms (tests/runs/factories.py), their
report computed by the portal (``portal.runs.reporting.run_report``), then ``portal.lib.report.budgets``."""

from __future__ import annotations

import pytest
from django.utils import timezone

from portal.lib.report import budgets
from portal.lib.security import signing
from portal.runs.models import ArmResult, Run
from portal.runs.reporting import export_report, run_report, summarize
from portal.signing import services
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

# plain 400 µs, tls 500 µs (p95 the same: constant samples), plain_new 1,000 µs, tls_new 3,000 µs:
# keepalive_tls +0.1 ms, handshake +2 ms.
ARMS = {"plain": [400] * 100, "tls": [500] * 100, "plain_new": [1000] * 100, "tls_new": [3000] * 100}


def changed(run: Run, **fields) -> Run:
    """The run with ``fields`` updated; a new finish time, so its stored report is computed afresh."""
    Run.objects.filter(pk=run.pk).update(finished=timezone.now(), **fields)
    run.refresh_from_db()
    return run


def by_name(result: dict) -> dict:
    return {item["name"]: item for item in result["results"]}


def test_parse_reads_name_value_pairs_and_names_each_mistake():
    assert budgets.parse(["handshake_ms=2", "failed_checks=0", " keepalive_tls_p95_ms = 1.5"]) == {
        "handshake_ms": 2.0,
        "failed_checks": 0,
        "keepalive_tls_p95_ms": 1.5,
    }
    assert budgets.parse([]) == {}
    with pytest.raises(budgets.BudgetError) as info:
        budgets.parse(["nope=1", "handshake_ms", "keepalive_tls_p50_ms=fast", "failed_checks=1.5"])
    errors = " | ".join(info.value.errors)
    assert "unknown budget 'nope'" in errors and "keepalive_tls_p50_ms" in errors  # known names listed
    assert "'handshake_ms': expected NAME=VALUE" in errors
    assert "keepalive_tls_p50_ms: 'fast' is not a number (ms)" in errors
    assert "failed_checks: a whole number of checks" in errors
    for bad, message in (
        (["handshake_ms=-1"], "finite number ≥ 0"),
        (["handshake_ms=nan"], "finite number ≥ 0"),
        (["handshake_ms=inf"], "finite number ≥ 0"),
        (["handshake_ms=1", "handshake_ms=2"], "given twice"),
    ):
        with pytest.raises(budgets.BudgetError, match=message):
            budgets.parse(bad)


def test_clean_checks_json_budgets():
    assert budgets.clean({"handshake_ms": 2, "failed_checks": "0"}) == {
        "handshake_ms": 2.0,
        "failed_checks": 0,
    }
    assert budgets.clean(None) == {}
    for bad in ([1, 2], "handshake_ms=2", {"handshake_ms": True}, {"handshake_ms": None}, {"x": 1}):
        with pytest.raises(budgets.BudgetError):
            budgets.clean(bad)


def test_keepalive_and_handshake_budgets_pass_and_fail(owner):
    report = run_report(make_run(owner, arms=ARMS, seconds=8))
    generous = budgets.evaluate(
        report, {"keepalive_tls_p50_ms": 0.5, "keepalive_tls_p95_ms": 0.1, "handshake_ms": 2.5}
    )
    assert generous["status"] == "pass"
    found = by_name(generous)
    assert [item["name"] for item in generous["results"]] == [
        "keepalive_tls_p50_ms",
        "keepalive_tls_p95_ms",
        "handshake_ms",
    ]
    assert found["keepalive_tls_p50_ms"]["value"] == pytest.approx(0.1, abs=0.002)
    assert found["keepalive_tls_p95_ms"]["status"] == "pass"  # equal to the limit passes
    assert found["handshake_ms"]["value"] == pytest.approx(2.0, abs=0.01)
    assert found["handshake_ms"]["unit"] == "ms" and found["handshake_ms"]["limit"] == 2.5
    assert "tls_new − plain_new" in found["handshake_ms"]["detail"]

    strict = budgets.evaluate(
        report, {"keepalive_tls_p50_ms": 0.05, "handshake_ms": 1, "keepalive_tls_p95_ms": 1}
    )
    assert strict["status"] == "fail"
    found = by_name(strict)
    assert found["keepalive_tls_p50_ms"]["status"] == "fail" and found["handshake_ms"]["status"] == "fail"
    assert found["keepalive_tls_p95_ms"]["status"] == "pass"
    assert found["handshake_ms"]["detail"].startswith(f"{found['handshake_ms']['value']:g} ms > 1 ms")


def test_a_cost_whose_arms_did_not_run_is_skipped_never_passed(owner):
    # The default three arms: no plain_new, so no handshake cost; no probe, so no server CPU.
    report = run_report(make_run(owner, seconds=8))
    result = budgets.evaluate(
        report, {"handshake_ms": 1000, "server_cpu_ms_per_req": 1000, "keepalive_tls_p50_ms": 10}
    )
    found = by_name(result)
    assert found["handshake_ms"]["status"] == "skip" and found["handshake_ms"]["value"] is None
    assert "needs the arms tls_new and plain_new" in found["handshake_ms"]["detail"]
    assert found["server_cpu_ms_per_req"]["status"] == "skip"
    assert "no server probe" in found["server_cpu_ms_per_req"]["detail"]
    assert found["keepalive_tls_p50_ms"]["status"] == "pass"
    assert result["status"] == "skip"  # nothing failed, something was not judged
    # A failure outranks a skip.
    assert budgets.evaluate(report, {"handshake_ms": 1, "keepalive_tls_p50_ms": 0})["status"] == "fail"


def test_server_cpu_budget_from_the_server_probe_or_the_local_process(owner):
    # The CPU's interval is over rounds: one round cannot judge it, three can.
    cpu = {"plain": 0.10, "tls": 0.16, "tls_new": 0.5}
    once = run_report(make_run(owner, target_name="once", seconds=8, server_cpu_ms=cpu))
    found = by_name(budgets.evaluate(once, {"server_cpu_ms_per_req": 0.1}))["server_cpu_ms_per_req"]
    assert found["status"] == "skip" and found["detail"].startswith("could not judge: unconfirmed")
    assert found["value"] == pytest.approx(0.06, abs=1e-6)
    probed = run_report(make_run(owner, seconds=8, rounds=3, server_cpu_ms=cpu))
    found = by_name(budgets.evaluate(probed, {"server_cpu_ms_per_req": 0.1}))["server_cpu_ms_per_req"]
    assert found["status"] == "pass" and found["value"] == pytest.approx(0.06, abs=1e-6)
    assert "server probe" in found["detail"]
    found = by_name(budgets.evaluate(probed, {"server_cpu_ms_per_req": 0.05}))["server_cpu_ms_per_req"]
    assert found["status"] == "fail"

    local = run_report(
        make_run(owner, target_name="local", rounds=3, local_cpu_ms={"plain": 0.2, "tls": 0.5, "tls_new": 1})
    )
    found = by_name(budgets.evaluate(local, {"server_cpu_ms_per_req": 0.2}))["server_cpu_ms_per_req"]
    assert found["status"] == "fail" and found["value"] == pytest.approx(0.3, abs=1e-6)
    assert "local process probe" in found["detail"]


def test_failed_checks_budget_and_a_not_judged_cost(owner):
    run = make_run(owner, arms=ARMS, seconds=8)
    clean = run_report(run)
    assert by_name(budgets.evaluate(clean, {"failed_checks": 0}))["failed_checks"]["status"] == "pass"
    # The tls arm answered 500 to everything: it is invalid and a check fails on it.
    ArmResult.objects.filter(run=run, arm="tls").update(status_codes={"500": 100})
    broken = run_report(changed(run))
    failed = [check["check"] for check in broken["validity"] if check["status"] == "fail"]
    assert failed
    result = budgets.evaluate(
        broken, {"failed_checks": 0, "keepalive_tls_p50_ms": 1000, "handshake_ms": 1000}
    )
    found = by_name(result)
    assert found["failed_checks"]["status"] == "fail" and found["failed_checks"]["value"] == len(failed)
    assert failed[0] in found["failed_checks"]["detail"]
    # keepalive_tls is about tls: not judged, so its generous budget is skipped, not passed.
    assert found["keepalive_tls_p50_ms"]["status"] == "skip"
    assert found["keepalive_tls_p50_ms"]["detail"].startswith("could not judge: tls is invalid")
    assert found["keepalive_tls_p50_ms"]["value"] is not None  # the number stays, the claim goes
    assert found["handshake_ms"]["status"] == "pass"  # tls_new and plain_new are fine
    assert result["status"] == "fail"
    assert (
        by_name(budgets.evaluate(broken, {"failed_checks": len(failed)}))["failed_checks"]["status"] == "pass"
    )


def test_the_report_carries_the_runs_budget_verdicts(owner):
    run = make_run(owner, arms=ARMS, seconds=8)
    assert run_report(run)["budgets"] is None  # no budgets: null
    config = {**run.config, "budgets": {"handshake_ms": 1.0, "failed_checks": 0}}
    report = run_report(changed(run, config=config))
    assert report["budgets"]["status"] == "fail"
    assert by_name(report["budgets"])["handshake_ms"]["status"] == "fail"
    assert report["run"]["config"]["budgets"] == config["budgets"]
    other = make_run(owner, arms=ARMS, target_name="s", seconds=8)
    assert summarize(changed(other, config={**other.config, "budgets": {"handshake_ms": 5}}))["budgets"] == {
        "status": "pass",
        "results": [by_name(run_report(other)["budgets"])["handshake_ms"]],
    }


def test_the_frozen_signed_report_carries_the_budgets_and_a_changed_verdict_fails_verification(owner):
    run = make_run(owner, arms=ARMS, seconds=8)
    run = changed(run, config={**run.config, "budgets": {"handshake_ms": 1}})
    services.freeze(run)
    exported = export_report(Run.objects.get(pk=run.pk))
    assert exported["budgets"]["status"] == "fail"
    assert signing.verify(exported, services.public_keys()) == []
    exported["budgets"]["status"] = "pass"  # a forged verdict
    assert signing.verify(exported, services.public_keys()) != []


def test_http3_budgets_judge_h3_against_h2_warm_and_on_new_connections(owner):
    # h2 600 µs, h3 450 µs (HTTP/3 quicker: −0.15 ms passes any limit); h2_new 3,000, h3_new
    # 3,500 µs (+0.5 ms).
    arms = {"h2": [600] * 100, "h3": [450] * 100, "h2_new": [3000] * 100, "h3_new": [3500] * 100}
    report = run_report(make_run(owner, arms=arms, seconds=8))
    result = budgets.evaluate(report, {"h3_vs_h2_p50_ms": 0, "h3_new_vs_h2_new_p50_ms": 0.4})
    found = by_name(result)
    assert [item["name"] for item in result["results"]] == ["h3_vs_h2_p50_ms", "h3_new_vs_h2_new_p50_ms"]
    assert found["h3_vs_h2_p50_ms"]["value"] == pytest.approx(-0.15, abs=0.005)
    assert found["h3_vs_h2_p50_ms"]["status"] == "pass" and "h3 − h2" in found["h3_vs_h2_p50_ms"]["detail"]
    new = found["h3_new_vs_h2_new_p50_ms"]
    assert new["value"] == pytest.approx(0.5, abs=0.01) and new["status"] == "fail"
    assert new["detail"].startswith(f"{new['value']:g} ms > 0.4 ms") and "h3_new − h2_new" in new["detail"]
    assert result["status"] == "fail"
    assert budgets.evaluate(report, {"h3_new_vs_h2_new_p50_ms": 1})["status"] == "pass"
    # Without the arms: skip, never pass.
    plain = budgets.evaluate(run_report(make_run(owner, seconds=8)), {"h3_vs_h2_p50_ms": 1000})
    assert plain["status"] == "skip" and "needs the arms h3 and h2" in plain["results"][0]["detail"]
