"""One path through a real Celery worker, broker (Redis) and database (PostgreSQL)."""

from __future__ import annotations

import time

from portal.projects.models import personal_project
from portal.runs import dispatch, services
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config


def test_a_queued_run_is_measured_by_a_real_worker(celery_worker, owner, plain_server, tls_server):
    target = Target.objects.create(project=personal_project(owner), name="local")
    config = engine_config(
        {"plain": plain_server.url(), "tls_new": tls_server.url()},
        users=2,
        spawn_rate=20,
        warmup_s=0.5,
        duration_s=1.5,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
    )
    run = services.create_run(owner, target, config)
    dispatch.enqueue(run)  # autocommit here: on_commit sends at once
    deadline = time.monotonic() + 90
    while True:
        run.refresh_from_db()
        if run.is_terminal:
            break
        assert celery_worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"still {run.status} after 90 s"
        time.sleep(0.5)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert [a.arm for a in run.arms.all()] == ["plain", "tls_new"]
    assert tls_server.counters.snapshot()["handshakes"] >= run.arms.get(arm="tls_new").requests


def test_cancel_through_a_worker_stops_within_5_s_and_keeps_finished_arms(celery_worker, owner, plain_server):
    target = Target.objects.create(project=personal_project(owner), name="local")
    config = engine_config(
        {"plain": plain_server.url()},
        users=2,
        spawn_rate=20,
        warmup_s=0.3,
        duration_s=3.0,
        rounds=5,
        arrival_rate=100,
    )
    run = services.create_run(owner, target, config)
    dispatch.enqueue(run)
    deadline = time.monotonic() + 60
    while not run.arms.exists():
        assert time.monotonic() < deadline and celery_worker.poll() is None
        time.sleep(0.1)
    time.sleep(1.0)  # inside the second arm's window
    asked = time.monotonic()
    assert services.cancel(run) == services.STOPPING  # what the page's and the API's cancel do
    while not run.is_terminal:
        assert time.monotonic() - asked < 5, "the swarm did not stop within 5 s"
        time.sleep(0.1)
        run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert [(a.arm, a.round, a.complete) for a in run.arms.order_by("position")] == [
        ("plain", 0, True),
        ("plain", 1, False),
    ]
    assert "Kept 1 finished arm(s) and 1 arm(s) cut short (plain)." in run.error
