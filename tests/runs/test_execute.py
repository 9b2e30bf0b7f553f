"""The task body and the executor against real local servers and the real engine."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.models import ArmResult, Run, RunAttempt
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.runs.factories import open_attempt
from tests.servers import closed_port
from workers import runner, tasks


def new_run(owner, arms: list[tuple[str, str]], duration_s: float = 1.5) -> Run:
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="local")
    config = engine_config(
        dict(arms),
        users=2,
        spawn_rate=50,
        warmup_s=0.5,
        duration_s=duration_s,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
    )
    return services.create_run(owner, target, config)


@pytest.mark.django_db(transaction=True)
def test_task_runs_three_arms_and_stores_each(owner, plain_server, tls_server):
    run = new_run(
        owner, [("plain", plain_server.url()), ("tls", tls_server.url()), ("tls_new", tls_server.url())]
    )
    assert tasks.run_benchmark(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.error == ""
    assert run.started <= run.finished
    assert run.engine["locust"] and run.engine["openssl"].startswith("OpenSSL")
    arms = list(run.arms.all())
    assert [a.arm for a in arms] == ["plain", "tls", "tls_new"]
    for arm in arms:
        assert arm.requests > 0 and arm.failures == 0 and arm.ttlb_hist and arm.complete
        assert arm.status_codes == {"200": arm.requests}
        assert arm.series and arm.started <= arm.finished
    # A redelivered message finds the run taken and does nothing.
    assert tasks.run_benchmark(run.pk) is None
    assert ArmResult.objects.filter(run=run).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_later_arm_that_fails_its_preflight_stops_the_run_before_the_first_arm(owner, plain_server):
    # Every arm is preflighted before any is measured (more: tests/runs/test_preflight_live.py).
    run = new_run(owner, [("plain", plain_server.url()), ("tls", f"https://127.0.0.1:{closed_port()}/1k")])
    tasks.run_benchmark(run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.preflight_failed
    assert run.error.startswith("Arm tls: preflight of ") and "connection_refused" in run.error
    assert "Nothing was measured" in run.error and "Kept" not in run.error
    assert not run.arms.exists()


@pytest.mark.django_db(transaction=True)
def test_timeout_stops_the_engine_and_says_so(owner, plain_server, monkeypatch):
    run = new_run(owner, [("plain", plain_server.url())], duration_s=60)
    monkeypatch.setattr(runner, "engine_limit_s", lambda config: 4.0)
    started = time.monotonic()
    tasks.run_benchmark(run.pk)
    assert time.monotonic() - started < 30
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error.startswith("Timed out after 4 s")


@pytest.mark.django_db(transaction=True)
def test_cancel_keeps_what_was_measured(owner, plain_server):
    run = new_run(owner, [("plain", plain_server.url()), ("plain_new", plain_server.url())], duration_s=60)

    def work() -> None:
        try:
            runner.execute_run(run.pk)
        finally:
            connection.close()  # the thread's own connection; the test database is dropped later

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 30
    while not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, engine__has_key="locust").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    time.sleep(3)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    worker.join(timeout=30)
    assert not worker.is_alive()
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    # The arm the cancel stopped is cut short, never "finished".
    assert "Kept 1 arm(s) cut short (plain)." in run.error and "finished" not in run.error
    (arm,) = run.arms.all()
    assert arm.arm == "plain" and not arm.complete and arm.requests > 0 and arm.duration_s < 30


@pytest.mark.django_db
def test_reaper_resumes_runs_without_heartbeat_and_fails_what_cannot_be_resumed(owner, settings):
    stale = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    fresh = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    worn = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    old = timezone.now() - timedelta(minutes=10)
    open_attempt(stale, heartbeat=old, worker="celery@h1 pid 7", current_arm="plain (measure)")
    open_attempt(fresh, heartbeat=timezone.now())
    open_attempt(worn, settings.TOLLGATE_MAX_RUN_ATTEMPTS, heartbeat=old, worker="celery@h2 pid 9")
    assert tasks.reap_stale_runs() == 2
    stale.refresh_from_db()
    fresh.refresh_from_db()
    worn.refresh_from_db()
    # Back in the queue for the next free worker, saying why; its lost attempt recorded.
    (lost,) = stale.attempts.all()
    assert stale.status == Run.Status.QUEUED and lost.ended is not None
    assert stale.waiting.startswith(
        "resuming: worker celery@h1 pid 7 lost (no heartbeat for 30 s) during arm plain"
    )
    assert lost.outcome == "lost" and "during arm plain" in lost.reason
    assert fresh.status == Run.Status.RUNNING
    # Lost as many times as allowed: failed with the reason, not resumed again.
    assert worn.status == Run.Status.FAILED and "celery@h2 pid 9 lost" in worn.error
    assert f"gave up after {settings.TOLLGATE_MAX_RUN_ATTEMPTS} attempts" in worn.error
    # No worker took the resumption in time: failed, naming the loss and the wait.
    RunAttempt.objects.filter(pk=lost.pk).update(ended=timezone.now() - timedelta(minutes=11))
    assert tasks.reap_stale_runs() == 1
    stale.refresh_from_db()
    assert stale.status == Run.Status.FAILED
    assert stale.error.startswith(
        "worker celery@h1 pid 7 lost (no heartbeat for 30 s) during arm plain (measure) at "
    )
    assert "; no worker free for 10 min." in stale.error
    assert stale.summary is not None and hasattr(stale, "frozen_report")


@pytest.mark.django_db
def test_reaper_resumes_a_run_past_its_deadline_even_with_a_live_heartbeat(owner):
    """An executor that beats but never ends (a hung engine read) is past its attempt's deadline."""
    hung = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    open_attempt(hung, worker="celery@h pid 3", deadline=timezone.now() - timedelta(seconds=1))
    assert tasks.reap_stale_runs() == 1
    hung.refresh_from_db()
    assert hung.status == Run.Status.QUEUED
    assert hung.waiting.startswith("resuming: worker celery@h pid 3 passed its deadline at ")


@pytest.mark.django_db(transaction=True)
def test_reaper_sends_again_the_task_of_a_queued_run_whose_message_is_gone(owner):
    """A broker restarted without persistence forgets queued messages: the run would wait for ever."""
    import redis
    from django.conf import settings

    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete("runs")
    forgotten = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    held = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    young = new_run(owner, [("plain", "http://127.0.0.1:1/")])
    old = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=forgotten.pk).update(created=old)
    Run.objects.filter(pk=held.pk).update(created=old, waiting="waiting for a generator (1 running on h)")
    assert tasks.reap_stale_runs() == 1
    assert broker.llen("runs") == 1  # the forgotten run's task, sent again; not the held or young one
    assert tasks.reap_stale_runs() == 0  # while a message waits, nothing more is sent
    assert broker.llen("runs") == 1
    broker.delete("runs")
    assert young.status == Run.Status.QUEUED
