"""Migrations runs 0020–0021 move every run's execution state off its row into RunAttempt rows: each
entry of the old ``Run.attempts`` list becomes a row, the open attempt of a running run keeps its
heartbeat, deadline, arm in progress and worker, a requeued run's last attempt ends when it was put
back, and the report's ``run.attempts`` reads the same as before. Undone, the columns come back."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from portal.runs.models import Run, RunAttempt
from portal.runs.reporting import run_data

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0019_run_scenario_moved")]
AFTER = [("runs", "0021_remove_run_attempt_state")]


def _old_runs(apps) -> dict:
    User, Project, Target, OldRun = (
        apps.get_model(*m)
        for m in (("auth", "User"), ("projects", "Project"), ("targets", "Target"), ("runs", "Run"))
    )
    user = User.objects.create(username="ann")
    project = Project.objects.create(name="ann")
    target = Target.objects.create(project=project, name="t", plain_url="http://127.0.0.1/")
    now = timezone.now().replace(microsecond=0)
    t = [now - timedelta(minutes=m) for m in (30, 20, 10)]
    lost = {"attempt": 1, "worker": "celery@a pid 1", "host": "a", "started": t[0].isoformat(),
            "ended": t[1].isoformat(), "outcome": "lost", "reason": "worker celery@a pid 1 lost",
            "arms": ["plain#0"], "partial": [{"arm": "tls", "round": 0, "attempt": 1, "worker": "w",
                                              "requests": 5, "failures": 0, "measured_s": 1.0}]}  # fmt: skip
    won = {"attempt": 2, "worker": "celery@b pid 2", "host": "b", "started": t[1].isoformat(),
           "ended": t[2].isoformat(), "outcome": "succeeded", "reason": "", "arms": ["tls#0"]}  # fmt: skip
    common = {"owner": user, "project": project, "target": target, "config": {}, "started": t[0]}
    return {
        "ended": OldRun.objects.create(
            **common,
            status="succeeded",
            finished=t[2],
            attempt=2,
            attempts=[lost, won],
            worker="celery@b pid 2",
            generator_host="b",
            heartbeat=t[2],
        ),  # fmt: skip
        "running": OldRun.objects.create(
            **common,
            status="running",
            attempt=2,
            attempts=[lost, {**won, "outcome": "running", "ended": None}],
            worker="celery@b pid 2",
            generator_host="b",
            heartbeat=now,
            deadline=now + timedelta(minutes=5),
            current_arm="tls (measure)",
            handback=True,
        ),  # fmt: skip
        "requeued": OldRun.objects.create(
            **common,
            status="queued",
            attempt=1,
            attempts=[{**lost, "ended": None}],
            requeued=t[1],
            waiting="resuming: worker celery@a pid 1 lost",
        ),  # fmt: skip
        "fresh": OldRun.objects.create(**{**common, "started": None}, status="queued"),
        "entries": (lost, won),
    }


@pytest.fixture
def leaves_migrated():
    """Whatever the test asserts, the database ends at today's migrations: the other tests of this
    process share it."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_each_runs_attempt_state_becomes_rows_and_reads_back_the_same(leaves_migrated):
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = _old_runs(executor.loader.project_state(BEFORE).apps)
    lost, won = old["entries"]
    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    # Then every later migration too: the rows are read back through today's models.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    ended = Run.objects.get(pk=old["ended"].pk)
    assert run_data(ended, None)["attempts"] == [lost, won]  # the report's shape, unchanged
    running = Run.objects.get(pk=old["running"].pk)
    first, current = running.attempts.all()
    assert first.ended is not None and first.outcome == "lost"
    assert (current.number, current.ended, current.outcome, current.worker, current.host) == (
        2, None, "running", "celery@b pid 2", "b"
    )  # fmt: skip
    assert current.heartbeat == old["running"].heartbeat and current.deadline == old["running"].deadline
    assert current.current_arm == "tls (measure)" and current.handback
    (put_back,) = Run.objects.get(pk=old["requeued"].pk).attempts.all()
    assert put_back.ended == old["requeued"].requeued and put_back.outcome == "lost"
    assert not RunAttempt.objects.filter(run_id=old["fresh"].pk).exists()
    assert RunAttempt.objects.count() == 5

    # Undone: the run's columns come back from the rows.
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    OldRun = executor.loader.project_state(BEFORE).apps.get_model("runs", "Run")
    back = OldRun.objects.get(pk=old["running"].pk)
    assert (back.attempt, back.worker, back.generator_host, back.current_arm) == (
        2,
        "celery@b pid 2",
        "b",
        "tls (measure)",
    )
    assert [e["outcome"] for e in back.attempts] == ["lost", "running"]
    assert OldRun.objects.get(pk=old["requeued"].pk).requeued == old["requeued"].requeued
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
