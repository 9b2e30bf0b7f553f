"""A second generator host: a separate Celery worker in its own network namespace (only loopback
addresses; it reaches the broker, the run's Locust master and the target through forwarders the test
opens), consuming its gen.<name> queue. The run's task invites it, its Locust workers join the master,
and the stored arm is the exact sum of all four workers' parts."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.models import Run
from portal.runs.reporting import run_report
from portal.targets.models import Target
from tests.conftest import ROOT
from tests.engine_config import engine_config
from tests.netns_bridge import Bridge, Unavailable
from workers import tasks
from workers.celery_app import app


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_queue(queue: str, proc: subprocess.Popen, timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        replies = app.control.inspect(timeout=1).active_queues() or {}
        if any(q["name"] == queue for queues in replies.values() for q in queues or []):
            return
    pytest.fail(f"the generator host never consumed {queue}")


@pytest.fixture
def generator_host(tmp_path):
    name = f"tg-gen-{os.getpid()}"
    try:
        bridge = Bridge(name).__enter__()
    except Unavailable as exc:
        pytest.skip(f"generator host test: {exc}")
    log = open(tmp_path / "generator.log", "w+")  # noqa: SIM115 - closed below
    proc = None
    try:
        bridge.forward(urlsplit(os.environ["CELERY_BROKER_URL"]).port or 6379)
        env = {
            **os.environ,
            "TOLLGATE_GENERATOR_QUEUE": "1",
            "TOLLGATE_GENERATOR_NAME": name,
            "PYTHONPATH": str(ROOT),
        }
        proc = subprocess.Popen(  # noqa: S603
            bridge.command(
                sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker",
                "-Q", f"idle-{name}", "--concurrency", "1", "-n", f"{name}@%h",
                "--without-mingle", "--without-gossip", "-l", "info",
            ),
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        _wait_for_queue(f"gen.{name}", proc)
        yield name, bridge
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.seek(0)
        print(log.read()[-3000:])  # shown when the test fails
        log.close()
        bridge.__exit__()


@pytest.mark.django_db(transaction=True)
def test_a_generator_host_in_its_own_namespace_joins_the_run(owner, plain_server, generator_host, settings):
    name, bridge = generator_host
    bridge.forward(plain_server.port)
    master_port = _free_port()
    bridge.forward(master_port)
    settings.TOLLGATE_MASTER_PORT = master_port
    settings.TOLLGATE_GENERATOR_HOSTS = "auto"
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="local")
    config = engine_config(
        {"plain": plain_server.url()},
        users=4,
        spawn_rate=100,
        warmup_s=0.5,
        duration_s=1.5,
        generators=2,
        arrival_rate=200,  # open loop, split across the generators: samples, not a core burnt flat out
    )
    run = services.create_run(owner, target, config)
    assert tasks.run_benchmark(run.pk) == "succeeded"
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    arm = run.arms.get(arm="plain")
    hosts = sorted(w["host"] for w in arm.generators)
    assert hosts == sorted([name, name, socket.gethostname(), socket.gethostname()]), arm.generators
    assert all(w["requests"] > 0 and w["lost_at"] is None for w in arm.generators), arm.generators
    assert arm.complete and arm.requests == sum(w["requests"] for w in arm.generators)
    entries = run_report(run)["generators"]
    assert sum(e["arms"]["plain"]["requests"] for e in entries if e["host"] == name) > 0
