"""Shared fixtures: real local servers (plain and TLS, self-signed certs made here), users, Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import LocalServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory) -> tuple[Path, Path]:
    from portal.lib.tls.certs import make_self_signed

    return make_self_signed(tmp_path_factory.mktemp("certs"), name="server")


@pytest.fixture
def plain_server():
    server = LocalServer().start()
    yield server
    server.stop()


@pytest.fixture
def tls_server(tls_cert):
    server = LocalServer(tls=tls_cert).start()
    yield server
    server.stop()


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("owner", password="owner-pass-123")


@pytest.fixture
def outsider(django_user_model):
    return django_user_model.objects.create_user("outsider", password="outsider-pass-123")


def run_module(module: str, payload: object, timeout: float) -> subprocess.CompletedProcess:
    """Run ``python -m module`` from the repository with ``payload`` as JSON on its stdin."""
    return subprocess.run(  # noqa: S603 - this interpreter, one of the repository's modules
        [sys.executable, "-m", module],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def bench_run(script: str, *args: str, timeout: float = 90) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``bench/<script>`` with this interpreter from the repository: the process and its figures
    (the JSON object on its last line; the process must have printed it)."""
    proc = subprocess.run(  # noqa: S603 - this interpreter, our own script
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert proc.stdout.strip(), f"exit code {proc.returncode}: {proc.stderr[-1500:]}"
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def bench_report(script: str, *args: str, timeout: float = 90) -> dict:
    """``bench_run`` of a bench that must exit 0: its figures."""
    proc, report = bench_run(script, *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-1500:]
    return report


def run_engine(config: dict, timeout: float = 120) -> tuple[list[dict], int, str]:
    """Run the real engine subprocess; return its JSON-line messages, exit code and stderr."""
    proc = run_module("workers.engine", config, timeout)
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.returncode, proc.stderr


@pytest.fixture
def engine():
    return run_engine


def database_url_for_children() -> str:
    """The URL of the database the tests use (pytest-django's test_… database), for subprocesses."""
    from django.db import connection

    s = connection.settings_dict
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"postgres://{s['USER']}{password}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture
def celery_worker(transactional_db, tmp_path):
    """A real Celery worker process consuming the runs queue, on the test database."""
    import redis

    broker = os.environ["CELERY_BROKER_URL"]
    redis.Redis.from_url(broker).delete("runs", "celery")
    log = open(tmp_path / "worker.log", "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(  # noqa: S603
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "worker",
            "-Q",
            "runs",
            "--concurrency",
            "1",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "info",
        ],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": database_url_for_children(), "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    log.seek(0)
    print(log.read()[-3000:])  # shown by pytest when the test failed
    log.close()


class Sshd:
    """A real OpenSSH server on loopback with a throwaway host key and one authorised test key."""

    def __init__(self, directory: Path, extra_config: str = "") -> None:
        import getpass
        import socket

        from portal.lib.security.sshkeys import generate_key

        self.dir = directory
        self.user = getpass.getuser()
        self.private_key, public = generate_key()
        (directory / "authorized_keys").write_text(public + "\n")
        subprocess.run(  # noqa: S603
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / "host_key")], check=True
        )
        self.host_public = (directory / "host_key.pub").read_text().split()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (directory / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {directory / 'host_key'}\n"
            f"PidFile {directory / 'sshd.pid'}\nAuthorizedKeysFile {directory / 'authorized_keys'}\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\nLogLevel ERROR\n" + extra_config
        )
        self.proc: subprocess.Popen | None = None

    @property
    def known_hosts(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_public[0]} {self.host_public[1]}\n"

    def start(self) -> Sshd:
        import shutil
        import socket
        import time

        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        if not Path(sshd).exists():
            pytest.fail("sshd not found: apt-get install openssh-server (.ci/run does)")
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation directory
        self.proc = subprocess.Popen(  # noqa: S603
            [sshd, "-D", "-e", "-f", str(self.dir / "sshd_config")],
            stderr=open(self.dir / "sshd.log", "w"),  # noqa: SIM115 - lives as long as sshd
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        pytest.fail(f"sshd did not start: {(self.dir / 'sshd.log').read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    server = Sshd(tmp_path_factory.mktemp("sshd")).start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _fresh_rate_limits():
    """allauth counts logins per address in the shared cache (Redis): each test starts uncounted."""
    from django.conf import settings

    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(settings.REDIS_URL)
        keys = list(client.scan_iter("*allauth:rl:*"))
        if keys:
            client.delete(*keys)
    else:  # the demo's file cache holds nothing a test needs to keep
        from django.core.cache import cache

        cache.clear()
    yield


def reap_as_if_silent(run) -> None:
    """Backdate ``run``'s attempt as if its worker had gone silent and let the reaper put it back in the
    queue. The executor's own heartbeat may land between the backdating and the reap (it beats every
    2 s): then both again, for at most 5 s."""
    from datetime import timedelta

    from django.utils import timezone

    from portal.runs.models import Run, RunAttempt
    from workers import runner

    for _ in range(50):
        RunAttempt.objects.filter(run=run).update(heartbeat=timezone.now() - timedelta(minutes=10))
        if runner.reap_stale_runs(max_silence_s=60):
            break
        time.sleep(0.1)
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED, (run.status, run.error)
