"""A target that stops answering mid-run, through the whole portal (issue 16): the engine stops the
arm, the run fails with the reason and keeps what was measured, and the report calls the arm invalid."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.runs.models import ArmResult, Run
from tests.faulty_servers import DyingServer
from tests.runs.test_evidence_live import checks, measure

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_target_that_dies_mid_arm_fails_the_run_with_the_reason_and_keeps_the_arms(
    client, owner, server_with
):
    alive = server_with()
    dying = DyingServer(die_after=300).start()  # the preflight, then ~300 answers of plain_new
    try:
        run, report = measure(owner, [("plain", alive.url()), ("plain_new", dying.url())], duration_s=8.0)
    finally:
        dying.stop()
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("Arm plain_new: target unreachable: ")
    assert "failed in the last 3 s (connection reset)" in run.error
    assert run.error.endswith("Kept 1 finished arm(s) and 1 arm(s) cut short (plain_new).")
    stored = {arm.arm: arm for arm in ArmResult.objects.filter(run=run)}
    assert stored["plain"].complete and not stored["plain"].stopped
    assert not stored["plain_new"].complete and stored["plain_new"].stopped.startswith("target unreachable")
    # Not the whole 8 s window: the arm stopped 3-4 s after the death, early in its warm-up or window.
    cut = stored["plain_new"]
    assert (cut.finished - cut.started).total_seconds() < 7 and cut.duration_s < 6.5
    arm = report["arms"]["plain_new"]
    assert arm["stopped"] == stored["plain_new"].stopped
    assert arm["invalid"] == f"stopped early: {arm['stopped']}"
    assert report["run"]["invalid_arms"] == {"plain_new": arm["invalid"]}
    errors = checks(report)["errors"]
    assert errors["status"] == "fail" and "plain_new: stopped early, target unreachable" in errors["detail"]
    client.force_login(owner)
    detail = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'data-invalid-arm="plain_new"' in detail and "target unreachable" in detail
