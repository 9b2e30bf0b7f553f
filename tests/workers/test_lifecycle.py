"""A run's lifecycle without races: the executor's own heartbeat, compare-and-set finishing, a
reaper that stops what it reaps, probe time in the limits, CPU stored as each arm ends."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from portal.projects.models import personal_project
from portal.runs import dispatch, services
from portal.runs.models import ArmResult, Run, RunAttempt
from tests.conftest import reap_as_if_silent
from tests.engine_config import engine_config
from tests.runs.factories import make_run
from tests.ssh_access import ssh_access
from workers import runner
from workers.celery_app import app

pytestmark = pytest.mark.django_db(transaction=True)


def _config(url: str, *, duration_s: float = 1.0, rounds: int = 1, probes: dict | None = None) -> dict:
    config = engine_config(
        {"plain": url},
        warmup_s=0.3,
        duration_s=duration_s,
        rounds=rounds,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
    )
    return {**config, "probes": probes} if probes else config


def _in_thread(run_id: int) -> threading.Thread:
    def work() -> None:
        try:
            runner.execute_run(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    return thread


def test_a_probe_slower_than_the_reapers_window_does_not_look_dead(owner, plain_server, tmp_path):
    """`openssl version` on this server takes 8 s; a reaper allowing 5 s of silence runs meanwhile.
    Heartbeats came only with engine output before, so this run used to be reaped mid-probe."""
    from tests.conftest import Sshd

    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    fake = bin_dir / "openssl"
    fake.write_text('#!/bin/sh\nif [ "$1" = version ]; then sleep 8; echo "OpenSSL 3.0.0 (slow)"; fi\n')
    fake.chmod(0o755)
    sshd = Sshd(tmp_path, extra_config=f"SetEnv PATH={bin_dir}:/usr/bin:/bin\n").start()
    try:
        target = services.get_or_create_target(personal_project(owner), "slow", plain_server.url("/1k"), "")
        ssh_access(target, sshd)
        run = services.create_run(
            owner, target, _config(plain_server.url("/1k"), probes={"ssh": True, "openssl_speed": True})
        )
        thread = _in_thread(run.pk)
        reaped = 0
        while thread.is_alive():
            reaped += runner.reap_stale_runs(max_silence_s=5)
            time.sleep(0.5)
    finally:
        sshd.stop()
    run.refresh_from_db()
    assert reaped == 0
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert (run.finished - run.started).total_seconds() > 8  # the probe really was that slow


def _arm_rows(run: Run) -> dict[str, tuple]:
    """Each stored arm (``arm#round``) with every stored figure and histogram, to compare byte for byte."""
    rows = ArmResult.objects.filter(run=run).order_by("position")
    return {
        f"{a.arm}#{a.round}": (
            a.ttfb_hist,
            a.ttlb_hist,
            a.connect_hist,
            a.tls_handshake_hist,
            a.requests,
            a.failures,
            a.series,
            a.status_codes,
            a.started,
            a.finished,
            a.worker,
            a.attempt,
            a.complete,
        )
        for a in rows
    }


def test_a_reaped_run_is_resumed_its_lost_engine_stops_and_its_arms_stay_byte_for_byte(owner, plain_server):
    run = services.create_run(owner, *_target_and_config(owner, plain_server, duration_s=1.0, rounds=6))
    thread = _in_thread(run.pk)
    deadline = time.monotonic() + 30
    while ArmResult.objects.filter(run=run).count() < 2:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.1)
    # As if the worker had been silent: the reaper puts the run back in the queue.
    reap_as_if_silent(run)
    reaped_at = time.monotonic()
    thread.join(timeout=30)
    assert not thread.is_alive()
    # Its executor saw the run was not its attempt's any more within a heartbeat or two and killed the
    # engine, long before the rounds it had left; it stored nothing after the reaper acted.
    assert time.monotonic() - reaped_at < 8
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and [a.number for a in run.attempts.all()] == [1]
    before = _arm_rows(run)
    assert 2 <= len(before) < 6 and all(row[-1] for row in before.values())
    # The next worker (this process again) measures only what is missing, then finishes.
    run = runner.execute_run(run.pk, worker="celery@second")
    assert run.status == Run.Status.SUCCEEDED, run.error
    after = _arm_rows(run)
    assert sorted(after) == [f"plain#{r}" for r in range(6)]
    assert {key: after[key] for key in before} == before  # the first attempt's arms, byte for byte
    assert {row[-2] for key, row in after.items() if key not in before} == {2}
    first, second = run.attempts.all()
    assert [first.outcome, second.outcome] == ["lost", Run.Status.SUCCEEDED]
    assert first.arms == sorted(before, key=lambda k: int(k.split("#")[1]))
    assert second.worker.startswith("celery@second pid ") and second.ended is not None
    assert run.summary["requests"] == sum(row[4] for row in after.values())


def _target_and_config(owner, server, **kwargs):
    target = services.get_or_create_target(personal_project(owner), "local", server.url("/1k"), "")
    return target, _config(server.url("/1k"), **kwargs)


def test_finishing_is_a_compare_and_set_from_running(owner, plain_server):
    run = services.create_run(owner, *_target_and_config(owner, plain_server))
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="reaped first")
    assert runner.finish(run, Run.Status.SUCCEEDED) is False
    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.error == "reaped first"
    # The reaper never touches a finished run, however old its heartbeat.
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    old = timezone.now() - timedelta(days=1)
    RunAttempt.objects.create(
        run=run, number=1, worker="celery@h pid 1", host="h", claimed=old, heartbeat=old
    )
    assert runner.reap_stale_runs() == 0
    assert Run.objects.get(pk=run.pk).status == Run.Status.SUCCEEDED


def test_no_reader_sees_a_run_ended_before_its_summary_is_stored(owner, monkeypatch):
    """A CI polling the status must never read "succeeded" with no summary or budgets to judge."""
    run = make_run(owner, status=Run.Status.RUNNING)
    seen = []
    store = runner.store_summary

    def store_and_look(ended: Run) -> None:
        store(ended)

        def look() -> None:  # another connection, as the API or a share link's status reads it
            seen.append(Run.objects.values_list("status", "summary").get(pk=ended.pk))
            connection.close()

        reader = threading.Thread(target=look)
        reader.start()
        reader.join()

    monkeypatch.setattr(runner, "store_summary", store_and_look)
    assert runner.finish(run, Run.Status.SUCCEEDED)
    assert seen == [("running", {})]  # while the summary is written, the run still reads running
    ended = Run.objects.get(pk=run.pk)
    assert ended.status == Run.Status.SUCCEEDED and ended.summary["requests"] > 0


def test_generator_cpu_is_stored_as_each_arm_ends_not_at_the_end_of_the_run(owner, plain_server):
    comm = Path(f"/proc/{os.getpid()}/comm").read_text().strip()
    target, config = _target_and_config(owner, plain_server, duration_s=1.5, rounds=3)
    run = services.create_run(owner, target, {**config, "probes": {"local_process": comm}})
    thread = _in_thread(run.pk)
    seen_mid_run = False
    while thread.is_alive():
        first = ArmResult.objects.filter(run=run, round=0).first()
        running = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).exists()
        if first is not None and running and "generator_cpu" in (first.server_cpu or {}):
            seen_mid_run = True
        time.sleep(0.1)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert seen_mid_run
    assert all("generator_cpu" in arm.server_cpu for arm in run.arms.all())


def test_time_limits_include_probe_time(owner, plain_server):
    target, config = _target_and_config(owner, plain_server, duration_s=10)
    bare = services.create_run(owner, target, config)
    probed = services.create_run(
        owner, target, {**config, "probes": {"ssh": True, "openssl_speed": True, "cryptsetup": True}}
    )
    (soft, hard), (psoft, phard) = dispatch.task_limits(bare), dispatch.task_limits(probed)
    assert soft > 10.3 and hard > soft
    # openssl speed (about 30 s, up to 4 min on a slow host) and cryptsetup run after the load.
    assert psoft - soft >= 400 and phard - hard >= 400


def test_the_reaper_has_its_own_queue():
    router = app.amqp.router
    assert router.route({}, "workers.tasks.reap_stale_runs")["queue"].name == "maintenance"
    assert router.route({}, "workers.tasks.run_benchmark")["queue"].name == "runs"
