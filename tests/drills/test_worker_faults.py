"""Fault drills on the run workers: real Celery workers, beat and the reaper on the test database and
broker, a real local target; each drill kills, stops or signals a worker mid-arm and checks the run's
final state, its reason and that every arm finished before the fault is intact (docs/reliability.md).

Times are scaled so that each drill stays under a minute: the reaper runs every 2 s and resumes a
run whose heartbeat has been silent for 6 s (30 s and 15 s by default).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from portal.projects.models import personal_project
from portal.runs import dispatch, services
from portal.runs.models import ArmResult, Run
from tests.conftest import ROOT, database_url_for_children

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

SILENCE_S = 6
ROUNDS = 4


class Workers:
    """Celery processes of one drill, each in its own process group, all ended at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url_for_children(),
            "PYTHONPATH": str(ROOT),
            "TOLLGATE_REAP_SILENCE_S": str(SILENCE_S),
            "TOLLGATE_REAP_EVERY_S": "2",
        }

    def start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.tmp / f"{name}.log", "a")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "celery", "-A", "workers.celery_app", *args, "-l", "info"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        return proc

    def worker(self, name: str, queues: str = "runs") -> subprocess.Popen:
        return self.start(
            name,
            "worker",
            "-Q",
            queues,
            "--concurrency",
            "1",
            "-n",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
        )

    def reaper(self) -> None:
        self.worker("maintenance", "maintenance,celery")
        self.start("beat", "beat", "--schedule", str(self.tmp / "beat-schedule"))

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                for sig in (signal.SIGCONT, signal.SIGKILL):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, sig)
                proc.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text()[-2500:]}" for p in sorted(self.tmp.glob("*.log")))


@pytest.fixture
def workers(tmp_path, transactional_db):
    import redis

    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).flushdb()
    stack = Workers(tmp_path)
    yield stack
    stack.stop_all()
    print(stack.logs())  # shown by pytest when the drill failed


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (pool processes, their engines), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _run(owner, server) -> Run:
    target = services.get_or_create_target(personal_project(owner), "local", server.url("/1k"), "")
    config = {
        "arms": [{"name": "plain", "url": server.url("/1k")}],
        "users": 2,
        "spawn_rate": 20,
        "warmup_s": 0.3,
        "duration_s": 2.0,
        "rounds": ROUNDS,
        "verify_tls": False,
    }
    run = services.create_run(owner, target, config)
    dispatch.enqueue(run)
    return run


def _wait(run: Run, until, limit_s: float, what: str) -> float:
    began = time.monotonic()
    while not until(run):
        assert time.monotonic() - began < limit_s, f"{what}: still {run.status} after {limit_s} s"
        time.sleep(0.2)
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


def test_kill_9_of_the_pool_process_mid_arm_resumes_at_once(workers, owner, plain_server):
    main = workers.worker("w1")
    run = _run(owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    (pool,) = [
        pid
        for pid in descendants(main.pid)
        if "workers.engine" not in Path(f"/proc/{pid}/cmdline").read_text()
    ]
    killed = time.monotonic()
    os.kill(pool, signal.SIGKILL)
    # The message comes straight back (task_reject_on_worker_lost); the new pool process sees the
    # old one gone and takes the run over without waiting for the reaper.
    _wait(run, lambda r: r.attempt == 2 and r.status == Run.Status.RUNNING, 20, "take-over")
    assert time.monotonic() - killed < SILENCE_S  # not the reaper: the redelivery
    _wait(run, lambda r: r.is_terminal, 60, "end")
    _finished_intact(run, before)
    assert [a["outcome"] for a in run.attempts] == ["lost", "succeeded"]
    assert "during arm plain" in run.attempts[0]["reason"]


def test_kill_9_of_the_whole_worker_mid_arm_is_resumed_by_another(workers, owner, plain_server):
    workers.reaper()
    first = workers.worker("w1")
    run = _run(owner, plain_server)
    _wait(run, lambda r: r.status == Run.Status.RUNNING, 30, "claim")
    workers.worker("w2")
    before = _first_arm_then_mid_arm(run)
    engines = [pid for pid in descendants(first.pid)]
    killed = time.monotonic()
    os.killpg(first.pid, signal.SIGKILL)  # the host died: worker, pool process; the engine with them
    time.sleep(0.5)
    assert not [pid for pid in engines if Path(f"/proc/{pid}").exists() and "Z" not in _state(pid)]
    _wait(run, lambda r: r.is_terminal, 90, "end")
    took_s = time.monotonic() - killed
    _finished_intact(run, before)
    lost, resumed = run.attempts
    assert lost["worker"].startswith("w1@") and lost["outcome"] == "lost"
    assert f"no heartbeat for {SILENCE_S} s" in lost["reason"] and "during arm plain" in lost["reason"]
    assert resumed["worker"].startswith("w2@") and resumed["outcome"] == "succeeded"
    assert took_s < 120
    print(f"kill -9 of the worker: terminal after {took_s:.1f} s, kept {len(before)} arm(s)")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_a_worker_stopped_mid_run_and_continued_is_resumed_and_its_old_engine_stops(
    workers, owner, plain_server
):
    """The worker (and its engine) stopped for 4× the reaper's silence, as a paused VM or a SIGSTOP
    would; meanwhile the reaper requeues the run. Continued, the old executor finds the run is not its
    attempt's any more, kills its engine and stores nothing; the same worker then resumes the run."""
    workers.reaper()
    main = workers.worker("w1")
    run = _run(owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    frozen = [main.pid, *descendants(main.pid)]
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()
    _wait(run, lambda r: r.status == Run.Status.QUEUED, 4 * SILENCE_S, "requeue")
    time.sleep(max(0.0, 4 * SILENCE_S - (time.monotonic() - stopped)))
    for pid in frozen:
        os.kill(pid, signal.SIGCONT)
    _wait(run, lambda r: r.is_terminal, 60, "end")
    took_s = time.monotonic() - stopped
    _finished_intact(run, before)
    assert [a["outcome"] for a in run.attempts] == ["lost", "succeeded"]
    assert run.attempts[1]["worker"].startswith("w1@")
    print(f"worker stopped {4 * SILENCE_S} s: terminal after {took_s:.1f} s, kept {len(before)} arm(s)")


def test_sigterm_hands_the_run_back_within_10_s_and_the_next_worker_resumes_it(workers, owner, plain_server):
    first = workers.worker("w1")
    run = _run(owner, plain_server)
    before = _first_arm_then_mid_arm(run)
    asked = time.monotonic()
    first.send_signal(signal.SIGTERM)  # as docker stop and systemd do
    first.wait(timeout=10)  # warm shutdown done: the worker let go of the run
    handed_s = time.monotonic() - asked
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and "was asked to stop during arm plain" in run.waiting
    assert run.arms.filter(complete=False).count() == 1  # the arm in progress, kept as partial
    workers.worker("w2")
    _wait(run, lambda r: r.is_terminal, 60, "end")
    _finished_intact(run, before)
    assert [a["outcome"] for a in run.attempts] == ["handed back", "succeeded"]
    assert run.attempts[0]["partial"][0]["requests"] > 0
    print(f"SIGTERM: handed back in {handed_s:.1f} s, kept {len(before)} arm(s)")
