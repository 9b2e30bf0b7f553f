"""Every arm is preflighted before any is measured (issue 22), through the whole portal: a run whose
TLS certificate does not verify, whose URL answers 404 or whose TLS port is closed ends failed in
seconds with the reason first (run page, API, CLI), stores no arm, and does not count against its
project's quota. Real servers, the real engine; each arm's window is 30 s, so a run that measured
the plain arm first could not end in time."""

from __future__ import annotations

import io
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from portal.api import tokens
from portal.projects.models import ProjectQuota, personal_project
from portal.runs import services
from portal.runs.models import ArmResult, Run
from portal.runs.quotas import count_problems, limits_for
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.servers import closed_port
from workers import runner
from workers.engine.preflight import INSECURE_HINT

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)

WINDOW_S = 30.0
# Engine start-up and one request per arm on a loaded machine: well under one arm's window.
STOPPED_WITHIN_S = 20.0
NOTHING_MEASURED = "Nothing was measured: every arm's URL is checked before the first arm is measured."


def start(owner, arms, **options) -> tuple[Run, float]:
    """Create the run and execute it to its end; the run and the seconds it took."""
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="preflight")
    load = {"users": 2, "spawn_rate": 100, "warmup_s": 1.0, "duration_s": WINDOW_S, "arrival_rate": 50}
    config = engine_config(dict(arms), **{**load, **options})
    run = services.create_run(owner, target, config)
    started = time.monotonic()
    runner.execute_run(run.pk)
    elapsed = time.monotonic() - started
    run.refresh_from_db()
    return run, elapsed


def assert_stopped_before_measuring(run: Run, elapsed: float) -> None:
    assert run.status == Run.Status.FAILED
    assert run.preflight_failed is True
    assert not ArmResult.objects.filter(run=run).exists()
    assert elapsed < STOPPED_WITHIN_S, elapsed
    assert run.error.endswith(NOTHING_MEASURED)


def test_a_self_signed_certificate_fails_the_run_before_the_plain_arm_is_measured(
    client, owner, plain_server, tls_server
):
    arms = [("plain", plain_server.url()), ("tls", tls_server.url()), ("tls_new", tls_server.url())]
    run, elapsed = start(owner, arms, verify_tls=True)
    assert_stopped_before_measuring(run, elapsed)
    assert run.error.startswith(f"Arm tls: preflight of {tls_server.url()} failed: TLS certificate verif")
    assert f"; {INSECURE_HINT}. " in run.error
    assert "untick Verify TLS / `--insecure` / `verify_tls: false` if the certificate is self-signed on" in (
        run.error
    )
    assert plain_server.counters.snapshot()["requests"] == 1  # its preflight only

    # The run page says why first: the reason right after the status, no checks badge of nothing.
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    status_at = page.index('id="run-status"')
    reason_at = page.index("untick Verify TLS")
    assert status_at < reason_at
    assert 'id="run-checks"' not in page

    # The API: the status and the reason.
    _, plaintext = tokens.issue(owner, run.project, scope="read", name="ci")
    found = client.get(reverse("api-run", args=[run.code]), HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    assert (found["status"], found["error"]) == ("failed", run.error)


def test_a_404_stops_the_run_before_measuring_with_the_status_and_the_body(owner, plain_server, tls_server):
    run, elapsed = start(owner, [("plain", plain_server.url()), ("tls", tls_server.url("/typo"))])
    assert_stopped_before_measuring(run, elapsed)
    assert run.error.startswith(
        f"Arm tls: preflight of {tls_server.url('/typo')} failed: it answered 404, outside the expected "
        'set (2xx); body (9 bytes): "not found". '
    )


def test_an_unreachable_tls_port_stops_the_run_before_the_plain_arm_is_measured(owner, plain_server):
    dead = f"https://127.0.0.1:{closed_port()}/1k"
    run, elapsed = start(owner, [("plain", plain_server.url()), ("tls", dead)])
    assert_stopped_before_measuring(run, elapsed)
    assert run.error.startswith(f"Arm tls: preflight of {dead} failed: target unreachable (connection_ref")
    assert plain_server.counters.snapshot()["requests"] == 1


def test_the_one_shot_probes_do_not_run_after_a_preflight_that_stopped_the_run(owner, plain_server):
    # openssl speed on the generator takes half a minute: not for a run that measured nothing.
    run, elapsed = start(
        owner, [("plain", plain_server.url("/missing"))], probes={"openssl_speed_local": True}
    )
    assert_stopped_before_measuring(run, elapsed)
    assert "openssl_speed" not in run.probes
    assert run.probes["errors"] == ["openssl speed on the generator: not run, the preflight stopped the run"]


def test_a_run_stopped_by_its_preflight_does_not_count_against_the_quota(owner, plain_server):
    project = personal_project(owner)
    ProjectQuota.objects.create(project=project, max_runs_per_day=1)
    limits = limits_for(project)
    run, _ = start(owner, [("plain", plain_server.url("/missing"))])
    assert run.status == Run.Status.FAILED and run.preflight_failed
    assert count_problems(project, limits) == []
    # A run that measured (here: one that succeeded) does count: the day's one run is used.
    measured, _ = start(owner, [("plain", plain_server.url())], duration_s=0.5, warmup_s=0.2)
    assert measured.status == Run.Status.SUCCEEDED, measured.error
    assert not measured.preflight_failed
    assert count_problems(project, limits) == [
        f"Project {project.name} started 1 run(s) in the last 24 hours; at most 1 a day (operator limit)."
    ]


def test_the_cli_exits_1_with_the_reason_on_stderr(owner, plain_server, tls_server):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "tollgate",
            "run",
            "--owner",
            owner.username,
            "--plain-url",
            plain_server.url(),
            "--tls-url",
            tls_server.url(),
            "--arms",
            "plain,tls,tls_new",
            "--warmup",
            "1",
            "--duration",
            str(WINDOW_S),
            stdout=out,
            stderr=err,
        )
    assert exit_info.value.code == 1
    run = Run.objects.get()
    assert run.preflight_failed and not run.arms.exists()
    said = err.getvalue().splitlines()
    # Why it failed is the status line, in words, said once; the TLS library's own text right after.
    first = f"run {run.code} failed: arm tls: preflight of {tls_server.url()} failed: TLS certificate"
    status = next(i for i, line in enumerate(said) if line.startswith(first))
    assert "the server's certificate did not verify: self-signed certificate" in said[status]
    assert "--insecure" in said[status] and "--insecure" in run.error
    assert said[status + 1].startswith(
        "the TLS library said: SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY"
    )
    assert not [line for line in said if line.startswith("error: ")]  # nothing beyond its first line
    assert not [line for line in said if "checks" in line]
