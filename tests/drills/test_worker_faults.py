"""Fault drills on the run workers: real Celery workers, beat and the reaper on the test database and
broker, a real local target; each drill kills, stops or signals a worker mid-arm and checks the run's
final state, its reason and that every arm finished before the fault is intact (docs/reliability.md).

Times are scaled so that each drill stays under a minute: the reaper runs every 2 s and resumes a
run whose heartbeat has been silent for 6 s (30 s and 15 s by default).
"""

from __future__ import annotations

import contextlib
import time

import psutil
import pytest
from django.db import close_old_connections

from portal.runs.models import ArmResult, Run
from tests.drills.runs import queue_run

SILENCE_S = 6
ROUNDS = 4
# The reaper scaled down for the drills (30 s of silence and every 15 s by default).
REAPER = {"TOLLGATE_REAP_SILENCE_S": str(SILENCE_S), "TOLLGATE_REAP_EVERY_S": "2"}


@pytest.fixture
def fast_reaper(stack):
    stack.env |= REAPER  # every process the drill starts from now on
    return stack


def _run(stack, owner, server) -> Run:
    run = queue_run(
        owner,
        server.url("/1k"),
        server.url("/1k").replace("http:", "https:"),
        arms=["plain"],
        rounds=ROUNDS,
        warmup_s=1,
        duration_s=2,
    )
    stack.dispatch(run)
    return run


def _wait(run: Run, until, limit_s: float, what: str) -> float:
    began = time.monotonic()
    while not until(run):
        assert time.monotonic() - began < limit_s, f"{what}: still {run.status} after {limit_s} s"
        time.sleep(0.2)
        close_old_connections()
        run.refresh_from_db()
    return time.monotonic() - began


def _arms(run: Run) -> dict[str, tuple]:
    return {
        f"{a.arm}#{a.round}": (a.ttlb_hist, a.ttfb_hist, a.requests, a.series, a.worker)
        for a in ArmResult.objects.filter(run=run, complete=True)
    }


def _first_arm_then_mid_arm(run: Run) -> dict[str, tuple]:
    _wait(run, lambda r: r.arms.filter(complete=True).exists(), 45, "first arm")
    time.sleep(1.0)  # well into the next arm's window
    return _arms(run)


def _finished_intact(run: Run, before: dict[str, tuple]) -> None:
    assert run.status == Run.Status.SUCCEEDED, run.error
    after = _arms(run)
    assert sorted(after) == [f"plain#{r}" for r in range(ROUNDS)]
    assert {key: after[key] for key in before} == before  # byte for byte


def _pool_process(worker) -> psutil.Process:
    """The worker's pool process: its child that is not an engine."""
    (pool,) = [p for p in worker.tree()[1:] if "workers.engine" not in " ".join(p.cmdline())]
    return pool


def test_kill_9_of_the_pool_process_mid_arm_resumes_at_once(stack, drill_owner, plain_server):
    worker = stack.worker("w1")
    run = _run(stack, drill_owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    killed = time.monotonic()
    _pool_process(worker).kill()
    # The message comes straight back (task_reject_on_worker_lost); the new pool process sees the
    # old one gone and takes the run over without waiting for the reaper.
    _wait(run, lambda r: r.attempts.count() == 2 and r.status == Run.Status.RUNNING, 20, "take-over")
    took_over_s = time.monotonic() - killed
    assert took_over_s < SILENCE_S  # not the reaper: the redelivery
    _wait(run, lambda r: r.is_terminal, 60, "end")
    _finished_intact(run, before)
    assert [a.outcome for a in run.attempts.all()] == ["lost", "succeeded"]
    assert "during arm plain" in run.attempts.get(number=1).reason
    print(
        f"DRILL kill -9 of the pool process: taken over after {took_over_s:.1f} s, terminal after "
        f"{time.monotonic() - killed:.1f} s, kept {len(before)} arm(s)"
    )


def test_kill_9_of_the_whole_worker_mid_arm_is_resumed_by_another(fast_reaper, drill_owner, plain_server):
    stack = fast_reaper
    stack.maintenance()
    first = stack.worker("w1")
    run = _run(stack, drill_owner, plain_server)
    _wait(run, lambda r: r.status == Run.Status.RUNNING, 30, "claim")
    stack.worker("w2")
    before = _first_arm_then_mid_arm(run)
    processes = first.tree()
    killed = time.monotonic()
    first.kill()  # the host died: worker, pool process and, with them, the engine
    assert psutil.wait_procs(processes, timeout=5)[1] == []
    _wait(run, lambda r: r.is_terminal, 90, "end")
    took_s = time.monotonic() - killed
    _finished_intact(run, before)
    lost, resumed = run.attempts.all()
    assert lost.worker.startswith("w1@") and lost.outcome == "lost"
    assert f"no heartbeat for {SILENCE_S} s" in lost.reason and "during arm plain" in lost.reason
    assert resumed.worker.startswith("w2@") and resumed.outcome == "succeeded"
    assert took_s < 120
    print(f"DRILL kill -9 of the worker: terminal after {took_s:.1f} s, kept {len(before)} arm(s)")


def _is_engine(process: psutil.Process) -> bool:
    with contextlib.suppress(psutil.Error):
        return process.cmdline()[1:3] == ["-m", "workers.engine"]
    return False


def test_a_worker_stopped_mid_run_and_continued_is_resumed_and_its_old_engine_stops(
    fast_reaper, drill_owner, plain_server
):
    """The worker (and its engine) stopped for 4× the reaper's silence, as a paused VM or a SIGSTOP
    would; meanwhile the reaper requeues the run. Continued, the old executor finds the run is not its
    attempt's any more, kills its engine and stores nothing; the same worker then resumes the run."""
    stack = fast_reaper
    stack.maintenance()
    worker = stack.worker("w1")
    run = _run(stack, drill_owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    frozen = worker.tree()  # the engine has a process group of its own: stop each process
    assert any(_is_engine(process) for process in frozen), frozen
    for process in frozen:
        with contextlib.suppress(psutil.NoSuchProcess):  # a short-lived child already gone
            process.suspend()
    stopped = time.monotonic()
    _wait(run, lambda r: r.status == Run.Status.QUEUED, 4 * SILENCE_S, "requeue")
    time.sleep(max(0.0, 4 * SILENCE_S - (time.monotonic() - stopped)))
    for process in frozen:
        # A child that was exiting when the tree was read (a stopped process cannot exit by itself) is
        # reaped meanwhile: seen once in CI.
        with contextlib.suppress(psutil.NoSuchProcess):
            process.resume()
    _wait(run, lambda r: r.is_terminal, 60, "end")
    took_s = time.monotonic() - stopped
    _finished_intact(run, before)
    assert [a.outcome for a in run.attempts.all()] == ["lost", "succeeded"]
    assert run.attempts.get(number=2).worker.startswith("w1@")
    print(f"DRILL worker stopped {4 * SILENCE_S} s: terminal after {took_s:.1f} s, kept {len(before)} arm(s)")


def test_sigterm_hands_the_run_back_within_10_s_and_the_next_worker_resumes_it(
    stack, drill_owner, plain_server
):
    first = stack.worker("w1")
    run = _run(stack, drill_owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    asked = time.monotonic()
    assert first.terminate(wait_s=10) is not None  # SIGTERM, as docker stop and systemd send: it let go
    handed_s = time.monotonic() - asked
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and "was asked to stop during arm plain" in run.waiting
    assert run.arms.filter(complete=False).count() == 1  # the arm in progress, kept as partial
    stack.worker("w2")
    _wait(run, lambda r: r.is_terminal, 60, "end")
    _finished_intact(run, before)
    assert [a.outcome for a in run.attempts.all()] == ["handed back", "succeeded"]
    assert [(p["arm"], p["round"]) for p in run.attempts.get(number=1).partial] == [("plain", 1)]
    print(f"DRILL SIGTERM: handed back in {handed_s:.1f} s, kept {len(before)} arm(s)")
