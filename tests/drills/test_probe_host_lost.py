"""Fault drill: the SSH probe host disappears mid-run (issue 16).

A real sshd on loopback, started by the drill, is the server probe's host (CPU sampler over SSH, and
``openssl speed`` after the load). During the second of three arms the drill ends it: killed, with its
session processes (the connection closes at once), or stopped (SIGSTOP: it stops answering without
closing anything, as a host that vanished from the network); or it stops it while ``openssl speed``
runs there (a stand-in that takes 30 s). The run must still end — succeeded, its arms complete, the
probe's failure recorded and shown — within seconds, never hang.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import ArmResult, Run
from tests.conftest import Sshd
from tests.engine_config import engine_config
from tests.ssh_access import ssh_access
from workers import runner

pytestmark = [pytest.mark.drill, pytest.mark.django_db(transaction=True)]

ARM_S = 2.5  # each arm: 0.3 s warm-up + 2.5 s


def _tree(pid: int) -> list[int]:
    """pid and its descendants (sshd's privilege-separated session and the sampler's shell)."""
    found = [pid]
    try:
        children = [
            child
            for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()
        ]
    except FileNotFoundError:  # it ended while being listed (the sampler's short-lived commands)
        return found
    for child in children:
        found += _tree(int(child))
    return found


def _run_in_thread(run_id: int) -> threading.Thread:
    def work() -> None:
        try:
            runner.execute_run(run_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def _start_run(owner, sshd: Sshd, plain_url: str, tls_url: str, arms: int = 3) -> Run:
    target = services.get_or_create_target(personal_project(owner), "probed", plain_url, tls_url)
    ssh_access(target, sshd)
    config = engine_config(
        [
            {"name": "plain", "url": plain_url},
            {"name": "tls", "url": tls_url},
            {"name": "plain_new", "url": plain_url},
        ][:arms],
        warmup_s=0.3,
        duration_s=ARM_S,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
        probes={"ssh": True, "openssl_speed": True},
    )
    return services.create_run(owner, target, config)


def _slow_openssl(tmp_path: Path) -> str:
    """sshd's extra config: a PATH where ``openssl`` takes 30 s (sleep 30) before it answers."""
    bin_dir = tmp_path / "slow-bin"
    bin_dir.mkdir()
    fake = bin_dir / "openssl"
    fake.write_text("#!/bin/sh\nsleep 30\necho OpenSSL 3.0.0 (slow)\n")
    fake.chmod(0o755)
    return f"SetEnv PATH={bin_dir}:/usr/bin:/bin\n"


def _until(condition, thread: threading.Thread, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while not (found := condition()):
        assert time.monotonic() < deadline and thread.is_alive(), "the run never got there"
        time.sleep(0.1)
    return found


def _sleeping_30(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"30"]
    return False


@pytest.mark.parametrize(
    ("how", "when"), [("killed", "arm"), ("stopped", "arm"), ("stopped", "openssl speed")]
)
def test_the_run_ends_with_its_arms_and_the_probe_error_when_the_ssh_host_goes(
    how, when, owner, plain_server, tls_server, tmp_path
):
    during_arm = when == "arm"
    sshd = Sshd(tmp_path, extra_config="" if during_arm else _slow_openssl(tmp_path)).start()
    pids: list[int] = []
    try:
        run = _start_run(owner, sshd, plain_server.url(), tls_server.url(), arms=3 if during_arm else 1)
        thread = _run_in_thread(run.pk)
        # The first arm stored with its server CPU: what the host gave before it went, and is kept.
        _until(lambda: ArmResult.objects.filter(run=run, arm="plain").exclude(server_cpu={}).exists(), thread)
        if during_arm:
            time.sleep(0.8)  # into the second arm
        else:
            _until(lambda: any(_sleeping_30(pid) for pid in _tree(sshd.proc.pid)), thread)
        pids = _tree(sshd.proc.pid)
        for pid in pids:
            # A session process (a sampler's command) may end between the listing and the signal.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        gone_at = time.time()
        thread.join(timeout=120)
        assert not thread.is_alive(), "the run hangs"
    finally:
        for pid in pids:  # a stopped sshd is let go, then ended
            for sig in (signal.SIGCONT, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        sshd.stop()  # the drill may have failed before it took the host away
    run.refresh_from_db()
    to_end_s = run.finished.timestamp() - gone_at
    errors = run.probes["errors"]
    print(f"DRILL probe host {how} during {when}: run {run.status} {to_end_s:.1f} s after; {errors}")
    assert run.status == Run.Status.SUCCEEDED, run.error
    arms = list(ArmResult.objects.filter(run=run).order_by("position"))
    names = ["plain", "tls", "plain_new"] if during_arm else ["plain"]
    assert [(arm.arm, arm.complete) for arm in arms] == [(name, True) for name in names]
    assert all(arm.requests > 0 for arm in arms)
    assert "server_cpu" in arms[0].server_cpu  # measured before the host went, and kept
    lost = [error for error in errors if error.startswith("openssl speed: the SSH connection to 127.0.0.1:")]
    assert len(lost) == 1 and " was lost (" in lost[0], errors
    if during_arm:
        # The sampler saw it first: the rest of arm 2 and arm 3 (about 4.8 s) have no server CPU.
        assert any(error.startswith("server CPU sampler: lost at ") for error in errors), errors
        assert to_end_s < 20
    else:
        # openssl speed was waiting on the server: given up 10 s later (5 s silent, 5 s unanswered
        # keepalive), not after its own 30 s.
        assert lost[0].endswith("(no answer for 10 s)") and to_end_s < 20
    assert reporting.run_report(run)["probes"]["errors"] == errors
