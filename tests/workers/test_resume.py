"""Attempts of a run in one process: a hand-back keeps the arm in progress as partial and the next
attempt measures it again; a cancel keeps finished arms byte for byte; an executor whose attempt is
over stores nothing; queued runs say what they wait for; a stopping worker asks for its runs back."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.live import cache_get, progress_key, queue_note
from portal.runs.models import ArmResult, Run, RunAttempt, WorkerSeen
from tests.engine_config import engine_config
from workers import arms, presence, runner

pytestmark = pytest.mark.django_db(transaction=True)


def _run(owner, server, *, rounds: int, duration_s: float = 1.0) -> Run:
    target = services.get_or_create_target(personal_project(owner), "local", server.url("/1k"), "")
    config = engine_config(
        {"plain": server.url("/1k")},
        warmup_s=0.3,
        duration_s=duration_s,
        rounds=rounds,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
    )
    return services.create_run(owner, target, config)


def _in_thread(run_id: int, worker: str = "") -> threading.Thread:
    def work() -> None:
        try:
            runner.execute_run(run_id, worker=worker)
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def _wait_for_arms(run: Run, count: int, thread: threading.Thread, limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while ArmResult.objects.filter(run=run).count() < count:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)


def _wait_for_phase(run: Run, phase: str, arm_index: int, thread: threading.Thread) -> None:
    """Until the live progress the worker publishes says arm ``arm_index`` is in ``phase`` (what the
    hand-back names as the arm in progress), however slowly the machine runs."""
    deadline = time.monotonic() + 30
    while True:
        live = cache_get(progress_key(run.code)) or {}
        if live.get("phase") == phase and live.get("arm_index", -1) >= arm_index:
            return
        assert time.monotonic() < deadline and thread.is_alive(), live
        time.sleep(0.05)


def _snapshot(run: Run) -> dict[str, tuple]:
    return {
        f"{a.arm}#{a.round}": (a.ttlb_hist, a.ttfb_hist, a.connect_hist, a.requests, a.series, a.finished)
        for a in ArmResult.objects.filter(run=run, complete=True)
    }


def _runs_queue_length() -> int:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("runs")


def test_a_handed_back_run_keeps_its_arms_and_its_next_attempt_measures_the_cut_arm_again(
    owner, plain_server
):
    run = _run(owner, plain_server, rounds=3, duration_s=3.0)
    queued_before = _runs_queue_length()
    thread = _in_thread(run.pk, worker="celery@first")
    _wait_for_arms(run, 1, thread)
    _wait_for_phase(run, "measure", 1, thread)  # into the second round's window
    asked = time.monotonic()
    assert presence.hand_back_runs("celery@first") == 1  # as the worker's warm shutdown does
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert time.monotonic() - asked < 10  # handed back within the 10 s a stopping worker has
    run.refresh_from_db()
    (handed,) = run.attempts.all()
    assert run.status == Run.Status.QUEUED and handed.handback and handed.ended is not None
    assert run.waiting.startswith("resuming: worker celery@first pid ")
    assert "was asked to stop during arm plain (measure)" in run.waiting
    assert _runs_queue_length() == queued_before + 1  # its task, sent again for the next worker
    stored = {a.round: a.complete for a in run.arms.all()}
    # The arm in progress kept, cut short: the second round, or a later one on a machine so slow that
    # the second window ended between the phase read and the hand-back.
    (cut,) = [r for r, complete in stored.items() if not complete]
    assert cut >= 1 and stored == {**dict.fromkeys(range(cut), True), cut: False}
    first = _snapshot(run)

    run = runner.execute_run(run.pk, worker="celery@second")
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert sorted(a.round for a in run.arms.all()) == [0, 1, 2] and cut <= 2
    assert all(a.complete for a in run.arms.all())
    assert {k: v for k, v in _snapshot(run).items() if k in first} == first
    assert [a.worker.split(" pid ")[0] for a in run.arms.order_by("position")] == [
        "celery@first" if r < cut else "celery@second" for r in range(3)
    ]
    first_attempt, second_attempt = (attempt.entry() for attempt in run.attempts.all())
    assert first_attempt["outcome"] == "handed back"
    assert first_attempt["arms"] == [f"plain#{r}" for r in range(cut)]
    (partial,) = first_attempt["partial"]
    assert partial["arm"] == "plain" and partial["round"] == cut
    # Cut in the second round's window, it measured something; a later round may have been cut in its
    # first milliseconds (seen once in CI: round 2, 0 requests), which is kept as partial all the same.
    assert partial["requests"] > 0 or cut > 1, partial
    assert second_attempt["arms"] == [f"plain#{r}" for r in range(cut, 3)]
    assert second_attempt["outcome"] == "succeeded"


def test_a_cancelled_run_keeps_its_finished_arms_byte_for_byte(owner, plain_server):
    run = _run(owner, plain_server, rounds=5)
    thread = _in_thread(run.pk)
    _wait_for_arms(run, 2, thread)
    before = _snapshot(run)
    assert services.cancel(run) == services.STOPPING
    thread.join(timeout=15)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    after = _snapshot(run)
    assert {k: after[k] for k in before} == before
    assert run.arms.filter(complete=False).count() <= 1


def test_an_executor_whose_attempt_is_over_stores_nothing(owner, plain_server):
    run = _run(owner, plain_server, rounds=1)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    now = timezone.now()
    mine = RunAttempt.objects.create(
        run=run,
        number=1,
        worker="celery@a pid 1",
        host="h",
        claimed=now,
        heartbeat=now,
        ended=now,
        outcome="lost",
    )
    RunAttempt.objects.create(
        run=run, number=2, worker="celery@b pid 2", host="h", claimed=now, heartbeat=now
    )
    message = {
        "arm": "plain",
        "round": 0,
        "url": plain_server.url("/1k"),
        "result": {"hist": {}, "complete": True},  # never read: refused before
    }
    # The executor of attempt 1, woken up after the run was resumed.
    assert arms.store_arm(mine, message) is None
    assert not ArmResult.objects.filter(run=run).exists()


def test_a_queued_run_says_what_it_waits_for(owner, plain_server):
    run = _run(owner, plain_server, rounds=1)
    now = timezone.now()
    assert queue_note(run, now) == "Waiting for a worker…"
    later = now + timedelta(minutes=3)
    WorkerSeen.objects.all().delete()
    assert queue_note(run, later).startswith(
        "Queued for 3 min and no worker has taken it: no worker consuming the runs queue has reported"
    )
    assert "(none ever has)" in queue_note(run, later)
    WorkerSeen.objects.create(
        name="celery@gone", host="h", queues=["runs"], last_seen=now - timedelta(minutes=5)
    )
    assert "the last one, celery@gone, 8 min ago" in queue_note(run, later)
    WorkerSeen.objects.create(name="maint@h", host="h", queues=["maintenance"], last_seen=later)
    assert "no worker consuming the runs queue" in queue_note(run, later)  # the wrong queue does not count
    WorkerSeen.objects.create(name="celery@here", host="h", queues=["runs"], last_seen=later)
    assert queue_note(run, later) == (
        "Queued for 3 min: 1 worker(s) consuming the runs queue are present and 0 run(s) are running; "
        "it starts when one is free."
    )
    Run.objects.filter(pk=run.pk).update(waiting="waiting for a generator (1 running on h)")
    run.refresh_from_db()
    assert queue_note(run, later) == "waiting for a generator (1 running on h)"
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    run.refresh_from_db()
    assert queue_note(run, later) is None
