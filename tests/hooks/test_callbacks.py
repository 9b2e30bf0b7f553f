"""The callback task's body, attempt by attempt, against real local receivers (the path through a
real worker with its retries: tests/hooks/test_end_to_end.py)."""

from __future__ import annotations

import json
import socket
import time

import pytest
import redis
from django.conf import settings
from django.db import transaction

from portal import vault
from portal.hooks import services
from portal.hooks.models import CallbackDelivery
from portal.lib.security import hooks as webhooks
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from tests.runs.factories import make_run
from tests.servers import closed_port
from workers import callbacks, runner

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished(owner):
    """A finished run of a scenario with a webhook; returns (run, secret)."""
    run = make_run(owner, summarize=True)
    scenario = Scenario.objects.create(project=run.project, target=run.target, name="nightly")
    Run.objects.filter(pk=run.pk).update(scenario=scenario, scenario_version=1)
    run.refresh_from_db()
    _, secret = services.create_trigger(scenario, owner)
    return run, secret


def point_at(run: Run, url: str) -> None:
    Scenario.objects.filter(pk=run.scenario_id).update(callback_url=url)


def test_one_attempt_delivers_a_signed_body(finished, callback_receiver):
    run, secret = finished
    point_at(run, callback_receiver.url)
    assert callbacks.deliver(run.pk, 1) is None
    [got] = callback_receiver.received
    assert webhooks.verify_tollgate([secret], got.headers, got.body, time.time()).ok
    data = json.loads(got.body)
    assert data["status"] == "succeeded" and data["headline"] == run.summary["headline"]
    assert data["scenario"] == {"id": str(run.scenario.code), "name": "nightly", "version": 1}
    assert data["links"]["share_url"].startswith(settings.TOLLGATE_BASE_URL + "/s/")
    row = CallbackDelivery.objects.get(run=run)
    assert (row.attempt, row.status, row.response_status, row.url) == (
        1,
        "delivered",
        200,
        callback_receiver.url,
    )
    assert vault.unseal(row.payload_enc) == data and secret not in row.payload_enc
    # A redelivered task (acks_late) changes nothing once delivered.
    assert callbacks.deliver(run.pk, 1) is None and callbacks.deliver(run.pk, 2) is None
    assert len(callback_receiver.received) == 1 and CallbackDelivery.objects.count() == 1


def test_a_server_error_is_retried_with_backoff_a_client_error_is_not(finished, callback_receiver, settings):
    run, _ = finished
    settings.TOLLGATE_CALLBACK_BACKOFF_S = 3
    settings.TOLLGATE_CALLBACK_ATTEMPTS = 3
    point_at(run, callback_receiver.url)
    callback_receiver.statuses = [503, 502, 500]
    assert [callbacks.deliver(run.pk, n) for n in (1, 2, 3)] == [3, 6, None]
    rows = list(CallbackDelivery.objects.filter(run=run).order_by("attempt"))
    assert [(r.status, r.response_status) for r in rows] == [
        ("failed", 503),
        ("failed", 502),
        ("failed", 500),
    ]
    assert rows[0].next_attempt_at is not None and rows[2].next_attempt_at is None
    assert len({r.body for r in callback_receiver.received}) == 1
    CallbackDelivery.objects.all().delete()
    callback_receiver.statuses = [404]
    assert callbacks.deliver(run.pk, 1) is None
    assert "not retried" in CallbackDelivery.objects.get().error


def test_a_receiver_that_does_not_answer_is_retried(finished):
    run, _ = finished
    point_at(run, f"http://127.0.0.1:{closed_port()}/cb")
    assert callbacks.deliver(run.pk, 1) == 2
    assert CallbackDelivery.objects.get().error.startswith(webhooks.NO_ANSWER)


def test_a_callback_outside_the_address_policy_is_refused_and_logged(finished, callback_receiver):
    run, _ = finished
    for url in ("http://10.20.30.40/cb", "http://169.254.169.254/latest/meta-data/", "http://[fd00::1]/cb"):
        CallbackDelivery.objects.all().delete()
        point_at(run, url)
        assert callbacks.deliver(run.pk, 1) is None  # refused for good: no retry
        row = CallbackDelivery.objects.get()
        assert row.status == "failed" and row.error.startswith("refused by the outbound address policy"), (
            row.error
        )
        assert row.payload_enc == ""  # nothing was even composed
    assert callback_receiver.received == []


def test_no_webhook_no_signature_no_callback(owner, callback_receiver):
    run = make_run(owner, summarize=True)
    scenario = Scenario.objects.create(
        project=run.project, target=run.target, name="unsigned", callback_url=callback_receiver.url
    )
    Run.objects.filter(pk=run.pk).update(scenario=scenario)
    assert callbacks.deliver(run.pk, 1) is None
    assert "no webhook" in CallbackDelivery.objects.get().error and callback_receiver.received == []


@pytest.mark.django_db(transaction=True)
def test_only_runs_of_scenarios_with_a_callback_url_enqueue_one(finished, owner, callback_receiver):
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete("maintenance")
    run, _ = finished
    assert callbacks.schedule(make_run(owner)) is False  # no scenario
    assert callbacks.schedule(run) is False  # a scenario without a callback URL
    point_at(run, callback_receiver.url)
    with transaction.atomic():  # as in runner.finish: sent once the run's end is committed
        assert callbacks.schedule(run) is True
        assert client.llen("maintenance") == 0
    [message] = client.lrange("maintenance", 0, -1)
    assert json.loads(message)["headers"]["task"] == callbacks.TASK
    client.delete("maintenance")


@pytest.mark.django_db(transaction=True)
def test_a_queued_run_cancelled_on_its_page_gets_its_callback_when_its_task_reaches_a_worker(
    client, owner, callback_receiver
):
    client_redis = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client_redis.delete("maintenance")
    run = make_run(owner, status=Run.Status.QUEUED)
    Run.objects.filter(pk=run.pk).update(started=None, finished=None)
    scenario = Scenario.objects.create(
        project=run.project, target=run.target, name="queued", callback_url=callback_receiver.url
    )
    Run.objects.filter(pk=run.pk).update(scenario=scenario)
    client.force_login(owner)
    client.post(f"/runs/{run.code}/cancel/", {"confirm": "yes"})
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    assert client_redis.llen("maintenance") == 0
    assert runner.execute_run(run.pk) is None  # the run's task, reaching a worker: it ends it
    [message] = client_redis.lrange("maintenance", 0, -1)
    assert json.loads(message)["headers"]["task"] == callbacks.TASK
    client_redis.delete("maintenance")


def test_a_receiver_that_is_not_http_reads_like_one_that_is_not_there(finished, monkeypatch):
    """A closed port, a port that never answers and an SSH server: the same error in the callback
    log, nothing the peer sent (the log is no port scanner or banner grabber)."""
    from tests.targets.test_verification import BannerServer

    monkeypatch.setattr(webhooks, "CALLBACK_TIMEOUT_S", 0.5)
    run, _ = finished
    ssh = BannerServer("127.0.0.1", b"SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13.5\r\n")
    silent = socket.create_server(("127.0.0.1", 0))  # listens, never accepts
    errors = {}
    try:
        for name, port in (("ssh", ssh.port), ("silent", silent.getsockname()[1]), ("closed", closed_port())):
            CallbackDelivery.objects.all().delete()
            point_at(run, f"http://127.0.0.1:{port}/cb")
            assert callbacks.deliver(run.pk, 1) == 2, name  # retried, like any network error
            errors[name] = CallbackDelivery.objects.get().error
    finally:
        ssh.stop()
        silent.close()
    assert len(set(errors.values())) == 1, errors
    assert errors["ssh"].startswith(webhooks.NO_ANSWER)
    assert "SSH" not in errors["ssh"] and "Errno" not in errors["closed"]
