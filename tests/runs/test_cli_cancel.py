"""Ctrl-C on ``manage.py tollgate run`` (issue 16): the CLI, a real process running the run in-process
with server and local probes, gets SIGINT in its second arm as a terminal sends it (to its whole
process group; the engine has a session of its own); the run ends cancelled within 5 s with the first
arm complete and the second kept as partial, the probes keep sampling to the end and the half-minute
openssl speed is skipped, and the CLI exits non-zero saying so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from portal.runs.models import ArmResult, Run
from tests.conftest import ROOT, database_url_for_children

# Transactional: the CLI process writes through its own connection. serial: it times a cancel.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]


def _wait_for(condition, timeout_s: float, proc: subprocess.Popen):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_ctrl_c_cancels_the_run_keeps_the_finished_arm_and_the_cut_one(
    admin_user, plain_server, sshd, tmp_path
):
    key, known = tmp_path / "key", tmp_path / "known_hosts"
    key.write_text(sshd.private_key)
    known.write_text(sshd.known_hosts)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DATABASE_URL": database_url_for_children(),
        "TOLLGATE_LOCAL_PROBE": "1",
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "tollgate", "run", "--plain-url", plain_server.url(),
         "--arms", "plain,plain_new", "--users", "2", "--spawn-rate", "10", "--warmup", "0.3",
         "--duration", "8", "--ssh-host", "127.0.0.1", "--ssh-port", str(sshd.port),
         "--ssh-user", sshd.user, "--ssh-key", str(key), "--ssh-known-hosts", str(known),
         "--server-process", "sshd", "--openssl-speed", "--local-process", "postgres"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,  # its own group, so the test can signal it as a terminal would
    )  # fmt: skip
    try:
        _wait_for(lambda: ArmResult.objects.filter(arm="plain").exists(), 90, proc)
        # Into plain_new's window (8 s more without the cancel), then Ctrl-C.
        _wait_for(lambda: plain_server.counters.snapshot()["connections"] > 50, 30, proc)
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the CLI and its probe's local sampler
        sent = time.monotonic()
        run = _wait_for(lambda: Run.objects.filter(status=Run.Status.CANCELLED).first(), 30, proc)
        ended = time.monotonic()
        out, err = proc.communicate(timeout=60)
        exited = time.monotonic()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    print(f"Ctrl-C: run cancelled {ended - sent:.2f} s after SIGINT, the CLI exited {exited - sent:.2f} s")
    assert ended - sent < 5.0
    assert exited - sent < 8.0  # and it printed the report (frozen and signed) meanwhile
    assert proc.returncode == 1, err
    assert f"run {run.code} cancelled" in err
    assert "error: Cancelled by the user. Kept 1 finished arm(s) and 1 arm(s) cut short (plain_new)." in err
    arms = {arm.arm: arm for arm in ArmResult.objects.filter(run=run)}
    assert arms["plain"].complete and arms["plain"].requests > 0
    assert not arms["plain_new"].complete and 0 < arms["plain_new"].duration_s < 8
    assert arms["plain_new"].requests > 0
    assert "(cut short)" in out
    # The samplers outlived the Ctrl-C: both arms have their server and generator CPU.
    assert run.probes["errors"] == ["openssl speed: not run, the run was cancelled"]
    for arm in arms.values():
        assert set(arm.server_cpu) == {"server_cpu", "generator_cpu"}, arm.arm
