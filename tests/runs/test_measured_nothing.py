"""A run that measured nothing is not a success (issue 22). Real servers through the real engine: a
target that answers the preflight and then only errors ends the run ``failed``, saying first what
every arm got, its arms kept and reported; a run with one invalid arm still reads succeeded with it.
Neither a failed run nor one recorded as succeeded with every arm invalid can be a baseline: no
button on its page, its POST refused (the API and the CLI: tests/api/test_baseline.py and below)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import ArmResult, Run
from portal.sharing import services as sharing
from portal.targets.models import Target
from tests.conftest import ROOT, database_url_for_children
from tests.engine_config import engine_config
from tests.runs.factories import make_run
from tests.servers import FailingAfter, ResettingServer
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


def measure(owner, arms) -> Run:
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="edges")
    config = engine_config(
        dict(arms),
        users=2,
        spawn_rate=100,
        warmup_s=0.5,
        duration_s=2.0,
        arrival_rate=200,  # open loop at a modest rate, as the other evidence tests
    )
    return runner.execute_run(services.create_run(owner, target, config).pk)


def test_a_target_that_breaks_after_the_preflight_fails_the_run_with_what_every_arm_got(
    client, owner, server_with, tls_cert
):
    # Each server answers its first five requests (any preflight) with the page, then 500s only.
    plain_app, tls_app = FailingAfter(ok=5, status=500), FailingAfter(ok=5, status=500)
    plain, tls = server_with(app=plain_app), server_with(tls=tls_cert, app=tls_app)
    run = measure(owner, [("plain", plain.url()), ("tls", tls.url())])
    assert run.status == Run.Status.FAILED, run.error
    # The arms are kept, and the reason is made of their stored status codes, which the servers
    # confirm: every measured 500 is one the server sent.
    arms = {arm.arm: arm for arm in ArmResult.objects.filter(run=run)}
    assert set(arms) == {"plain", "tls"}
    served = {"plain": plain_app.failed, "tls": tls_app.failed}
    got = {}
    for name, arm in arms.items():
        assert set(arm.status_codes) == {"500"}, arm.status_codes  # the warm-up took the good answers
        got[name] = arm.status_codes["500"]
        assert 0 < got[name] <= served[name]
    if got["plain"] == got["tls"]:
        assert run.error == f"no arm measured the page: 500 × {got['plain']:,} on every arm"
    else:
        assert run.error == (
            f"no arm measured the page: 500 on every arm (plain × {got['plain']:,}, tls × {got['tls']:,})"
        )
    # The report and the summary are there (partial results kept), every arm invalid.
    run.refresh_from_db()
    assert run.summary["arms"] == ["plain", "tls"] and set(run.summary["invalid_arms"]) == {"plain", "tls"}
    report = reporting.run_report(run)
    assert report["run"]["status"] == "failed" and report["run"]["error"] == run.error
    assert all(cost["verdict"] is None for cost in report["costs"])
    # The page says why it failed first, then what the checks found; it offers no pin.
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    status_line = re.search(r"<p>Status: (.*?)</p>", page, re.S).group(1)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", status_line)).strip()
    assert text.startswith(f"failed: {run.error} · 2 invalid arms (plain, tls)"), text
    assert 'id="pin-baseline"' not in page and "Pin as baseline" not in page
    # Its reason is said once, in the status line: the note beside the actions does not repeat it.
    assert "A failed run cannot be a baseline: only a run that succeeded can." in page
    assert page.count(run.error) == 1
    # The POST behind the button refuses too, with the reason, and pins nothing.
    answer = client.post(reverse("runs-pin-baseline", args=[run.code]), follow=True).content.decode()
    assert "A failed run cannot be a baseline" in answer and run.error in answer
    run.target.refresh_from_db()
    assert run.target.baseline_id is None
    # The list and the shared report say the same, reason first.
    listing = client.get(reverse("runs-list")).content.decode()
    assert f'<span class="run-reason" title="{run.error}">: {run.error[:119]}' in listing
    _, token = sharing.create_share(owner, run=run)
    client.logout()
    shared = client.get(urlsplit(sharing.share_url(token)).path).content.decode()
    assert f'<span id="run-reason">: {run.error}</span> ·' in shared


def test_a_run_with_one_invalid_arm_still_reads_succeeded_with_it(client, owner, server_with):
    resetting = ResettingServer(every=4).start()  # three connections in four reset: plain_new fails
    try:
        run = measure(owner, [("plain", server_with().url()), ("plain_new", resetting.url())])
    finally:
        resetting.stop()
    assert run.status == Run.Status.SUCCEEDED, run.error
    run.refresh_from_db()
    assert run.summary["invalid_arms"] == ["plain_new"]
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert "1 invalid arm (plain_new)" in page and 'id="run-reason"' not in page
    assert 'id="pin-baseline"' in page  # one arm measured the page: it may be a reference


def _legacy(owner) -> Run:
    """A run stored as succeeded before this change although every arm got 404s."""
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100})
    ArmResult.objects.filter(run=run).update(status_codes={"404": 100})
    Run.objects.filter(pk=run.pk).update(summary=reporting.summarize(run))
    run.refresh_from_db()
    return run


def test_a_run_stored_as_succeeded_with_every_arm_invalid_is_no_baseline(client, owner):
    run = _legacy(owner)
    assert run.status == Run.Status.SUCCEEDED and set(run.summary["invalid_arms"]) == {"plain", "tls"}
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="pin-baseline"' not in page and "none of its arms measured the page" in page
    client.post(reverse("runs-pin-baseline", args=[run.code]))
    run.target.refresh_from_db()
    assert run.target.baseline_id is None


def _cli(*args: str) -> subprocess.CompletedProcess:
    """``manage.py tollgate baseline …`` in a process of its own, on the test database."""
    return subprocess.run(  # noqa: S603 - our own interpreter and manage.py
        [sys.executable, "manage.py", "tollgate", "baseline", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url_for_children()},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_cli_refuses_to_pin_with_the_reason_and_pins_what_it_may(owner, django_user_model):
    reason = "no arm measured the page: 404 × 1,200 on every arm"
    failed = make_run(owner, status=Run.Status.FAILED)
    Run.objects.filter(pk=failed.pk).update(error=reason)
    refused = _cli("pin", str(failed.code))
    assert refused.returncode == 1 and refused.stdout == ""
    assert f"A failed run cannot be a baseline: only a run that succeeded can (it failed: {reason})." in (
        refused.stderr
    )
    legacy = _legacy(owner)
    with pytest.raises(CommandError, match="none of its arms measured the page"):
        call_command("tollgate", "baseline", "pin", str(legacy.code), "--user", "owner")
    for run in (failed, legacy):
        run.target.refresh_from_db()
        assert run.target.baseline_id is None
    good = make_run(owner)
    pinned = _cli("pin", str(good.code))
    assert pinned.returncode == 0 and "is the baseline of t" in pinned.stdout, pinned.stderr
    good.target.refresh_from_db()
    assert good.target.baseline_id == good.pk
    # Only members and owners of the run's project pin; others do not even learn that it exists.
    django_user_model.objects.create_user("stranger", password="stranger-pass-123")
    with pytest.raises(CommandError, match=f"no run with id '{good.code}'"):
        call_command("tollgate", "baseline", "unpin", str(good.code), "--user", "stranger")
    out = io.StringIO()
    call_command("tollgate", "baseline", "unpin", str(good.code), stdout=out)
    assert "unpinned" in out.getvalue()
    good.target.refresh_from_db()
    assert good.target.baseline_id is None
