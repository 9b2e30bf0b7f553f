"""Shared fixtures: real local servers (plain and TLS, self-signed certs made here), users, Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import LocalServer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def tls_cert(tmp_path_factory) -> tuple[Path, Path]:
    from portal.lib.certs import make_self_signed

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


def run_engine(config: dict, timeout: float = 120) -> tuple[list[dict], int, str]:
    """Run the real engine subprocess; return its JSON-line messages, exit code and stderr."""
    proc = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "workers.engine"],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
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
