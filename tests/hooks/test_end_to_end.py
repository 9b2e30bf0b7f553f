"""End to end: a signed webhook through Gunicorn starts a run that a real Celery worker measures
against local servers; its signed callback reaches a real local receiver after two failed attempts;
and the shell step of docs/ci.md, run by bash, follows a run to its verdict."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from portal.hooks import services
from portal.hooks.models import CallbackDelivery
from portal.lib.security import hooks as webhooks
from portal.projects.models import personal_project
from portal.runs import starting
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from tests.conftest import ROOT
from tests.hooks.conftest import send, signed
from tests.servers import closed_port

pytestmark = pytest.mark.django_db(transaction=True)
LOAD = {"arms": ["plain", "tls_new"], "users": 2, "spawn_rate": 20, "warmup_s": 0.5, "duration_s": 1.5}


def scenario_for(owner, plain_url: str, tls_url: str, name: str = "ci") -> Scenario:
    return starting.save_scenario(
        personal_project(owner),
        name,
        {"plain_url": plain_url, "tls_url": tls_url, "verify_tls": False, **LOAD},
    )


def wait_for(check, what: str, worker, timeout_s: float = 90):
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        assert worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s} s"
        time.sleep(0.3)


def test_a_signed_webhook_runs_the_scenario_and_the_signed_callback_arrives(
    owner, portal_server, hooks_worker, plain_server, tls_server, callback_receiver
):
    callback_receiver.statuses = [500, 500, 200]  # two failed attempts, then delivered
    scenario = scenario_for(owner, plain_server.url(), tls_server.url())
    Scenario.objects.filter(pk=scenario.pk).update(callback_url=callback_receiver.url)
    trigger, secret = services.create_trigger(scenario, owner)
    body = json.dumps({"idempotency_key": "pipeline-1", "overrides": {"users": 1}}).encode()
    answer = send(portal_server.url(f"/hooks/{trigger.public_id}"), body, signed(secret, body))
    assert answer.status == 202, answer.data
    run = Run.objects.get(code=answer.data["run_id"])
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, "the run ended", hooks_worker)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.config["users"] == 1 and tls_server.counters.snapshot()["handshakes"] > 0

    wait_for(lambda: len(callback_receiver.received) >= 3, "three callback attempts", hooks_worker, 60)
    wait_for(
        lambda: CallbackDelivery.objects.filter(run=run, status="delivered").exists(),
        "logged",
        hooks_worker,
        10,
    )
    attempts = list(CallbackDelivery.objects.filter(run=run).order_by("attempt"))
    assert [(a.attempt, a.status, a.response_status) for a in attempts] == [
        (1, "failed", 500),
        (2, "failed", 500),
        (3, "delivered", 200),
    ]
    assert "retrying in 1 s" in attempts[0].error and "retrying in 2 s" in attempts[1].error
    received = callback_receiver.received
    # Exponential backoff (1 s, then 2 s, in the tests), measured on the receiver's clock.
    assert received[1].at - received[0].at >= 0.9 and received[2].at - received[1].at >= 1.9
    assert len({r.body for r in received}) == 1  # the same body each time, signed anew
    for got in received:
        verdict = webhooks.verify_tollgate([secret], got.headers, got.body, time.time())
        assert verdict.ok, verdict.reason
        assert not webhooks.verify_tollgate(["whsec_other"], got.headers, got.body, time.time()).ok
    data = json.loads(received[-1].body)
    assert (data["run_id"], data["status"], data["error"]) == (str(run.code), "succeeded", None)
    assert data["headline"] == run.summary["headline"] and data["headline"]
    assert data["costs"] == run.summary["costs"] and data["budgets"] == run.summary.get("budgets")
    assert data["links"] == {k: answer.data[k] for k in ("report_url", "share_url", "status_url")}
    assert received[-1].headers["Content-Type"] == "application/json"


def test_a_webhook_run_against_a_self_signed_certificate_fails_before_measuring_and_the_callback_says_why(
    owner, portal_server, hooks_worker, plain_server, tls_server, callback_receiver
):
    # Verify TLS on, 30 s windows: measuring the plain arm first would take half a minute.
    scenario = starting.save_scenario(
        personal_project(owner),
        "strict",
        {
            "plain_url": plain_server.url(),
            "tls_url": tls_server.url(),
            "verify_tls": True,
            **LOAD,
            "duration_s": 30,
        },
    )
    Scenario.objects.filter(pk=scenario.pk).update(callback_url=callback_receiver.url)
    trigger, secret = services.create_trigger(scenario, owner)
    body = json.dumps({"idempotency_key": "pipeline-self-signed"}).encode()
    sent = time.monotonic()
    answer = send(portal_server.url(f"/hooks/{trigger.public_id}"), body, signed(secret, body))
    assert answer.status == 202, answer.data
    run = Run.objects.get(code=answer.data["run_id"])
    wait_for(lambda: Run.objects.get(pk=run.pk).is_terminal, "the run ended", hooks_worker, 30)
    assert time.monotonic() - sent < 25
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.preflight_failed and not run.arms.exists()
    assert "TLS certificate verification failed" in run.error
    assert (
        "untick Verify TLS / `--insecure` / `verify_tls: false` if the certificate is self-signed"
        in run.error
    )
    assert plain_server.counters.snapshot()["requests"] == 1  # its preflight

    wait_for(lambda: callback_receiver.received, "the callback", hooks_worker, 30)
    got = callback_receiver.received[0]
    assert webhooks.verify_tollgate([secret], got.headers, got.body, time.time()).ok
    data = json.loads(got.body)
    assert (data["status"], data["error"], data["costs"]) == ("failed", run.error, [])


def shell_step() -> str:
    text = (ROOT / "docs" / "ci.md").read_text()
    found = re.search(
        r"<!-- tollgate-ci-shell: begin -->\n```bash\n(.*?)```\n<!-- tollgate-ci-shell: end -->", text, re.S
    )
    assert found, "docs/ci.md lost its shell step markers"
    return found.group(1)


def run_shell_step(tmp_path, url: str, secret: str, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "tollgate.sh"
    script.write_text(shell_step())
    return subprocess.run(  # noqa: S603
        ["bash", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": os.environ["PATH"],
            "TOLLGATE_WEBHOOK_URL": url,
            "TOLLGATE_WEBHOOK_SECRET": secret,
            "TOLLGATE_POLL_S": "1",
            **env,
        },
    )


def test_the_shell_step_of_the_docs_follows_a_run_to_its_verdict(
    owner, portal_server, hooks_worker, plain_server, tls_server, tmp_path
):
    scenario = scenario_for(owner, plain_server.url(), tls_server.url())
    trigger, secret = services.create_trigger(scenario, owner)
    url = portal_server.url(f"/hooks/{trigger.public_id}")
    done = run_shell_step(tmp_path, url, secret, TOLLGATE_OVERRIDES='{"users": 1}')
    assert done.returncode == 0, done.stdout + done.stderr
    run = Run.objects.get()
    assert (run.status, run.source, run.config["users"]) == ("succeeded", "webhook", 1)
    assert run.summary["headline"] in done.stdout
    assert f"run {run.code} started" in done.stdout

    # A wrong secret: the webhook's refusal is shown and the step fails.
    refused = run_shell_step(tmp_path, url, "whsec_wrong")
    assert refused.returncode == 1 and "bad signature" in refused.stderr

    # A run that fails (nothing listens on the target's ports) fails the pipeline.
    down = scenario_for(
        owner, f"http://127.0.0.1:{closed_port()}/1k", f"https://127.0.0.1:{closed_port()}/1k", "down"
    )
    trigger, secret = services.create_trigger(down, owner)
    failed = run_shell_step(tmp_path, portal_server.url(f"/hooks/{trigger.public_id}"), secret)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "the run failed" in failed.stderr


def test_a_failed_budget_fails_the_shell_step_with_3_and_the_callback_says_so(
    owner, portal_server, hooks_worker, plain_server, tls_server, tmp_path, callback_receiver
):
    scenario = scenario_for(owner, plain_server.url(), tls_server.url())
    # A full handshake on loopback costs about 2 ms: a limit of 0 ms fails.
    Scenario.objects.filter(pk=scenario.pk).update(
        budgets={"handshake_ms": 0}, callback_url=callback_receiver.url
    )
    trigger, secret = services.create_trigger(scenario, owner)
    url = portal_server.url(f"/hooks/{trigger.public_id}")
    # Three rounds: the cost gets its interval, without which its budget could not judge (skip, exit 0).
    overrides = '{"arms": ["plain_new", "tls_new"], "rounds": 3, "duration_s": 1}'
    done = run_shell_step(tmp_path, url, secret, TOLLGATE_OVERRIDES=overrides)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "budget handshake_ms failed" in done.stderr
    run = Run.objects.get()
    assert run.summary["budgets"]["status"] == "fail"
    wait_for(lambda: callback_receiver.received, "the callback", hooks_worker, 30)
    assert json.loads(callback_receiver.received[0].body)["budgets"] == run.summary["budgets"]
