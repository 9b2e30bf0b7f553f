"""One path through a real Celery worker, broker (Redis) and database (PostgreSQL)."""

from __future__ import annotations

import time

from portal.projects.models import personal_project
from portal.runs import dispatch, services
from portal.runs.models import Run
from portal.targets.models import Target


def test_a_queued_run_is_measured_by_a_real_worker(celery_worker, owner, plain_server, tls_server):
    target = Target.objects.create(project=personal_project(owner), name="local")
    config = {
        "arms": [{"name": "plain", "url": plain_server.url()}, {"name": "tls_new", "url": tls_server.url()}],
        "users": 2,
        "spawn_rate": 20,
        "warmup_s": 0.5,
        "duration_s": 1.5,
        "verify_tls": False,
    }
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
