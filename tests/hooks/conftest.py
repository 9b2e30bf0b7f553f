"""The portal on a real Gunicorn (one per test module), a real Celery worker on the runs and
maintenance queues, a receiver for callbacks, and signed requests to send."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from portal.lib.security import hooks as webhooks
from tests.conftest import ROOT, database_url_for_children

# Callbacks are retried after 1 s, 2 s, … in the tests (the default base is 2 s).
CHILD_ENV = {"TOLLGATE_CALLBACK_BACKOFF_S": "1", "PYTHONPATH": str(ROOT)}


def _stop(proc: subprocess.Popen, log_path: Path) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
    print(log_path.read_text()[-3000:])  # shown by pytest when a test failed


@dataclass
class Portal:
    base_url: str
    proc: subprocess.Popen

    def url(self, path: str) -> str:
        return self.base_url + path


@pytest.fixture(scope="module")
def portal_server(django_db_setup, django_db_blocker, tmp_path_factory):
    """The portal on Gunicorn on a free loopback port, on the test database."""
    with django_db_blocker.unblock():
        database_url = database_url_for_children()
    log_path = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    log = open(log_path, "w")  # noqa: SIM115 - lives as long as Gunicorn
    env = {**os.environ, **CHILD_ENV, "DATABASE_URL": database_url}
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--bind", "127.0.0.1:0"]
        + ["--workers", "1", "--worker-class", "gthread", "--threads", "4", "--no-control-socket"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    port = None
    while port is None:
        found = re.search(r"Listening at: http://127\.0\.0\.1:(\d+)", log_path.read_text())
        port = int(found.group(1)) if found else None
        if port is None and (proc.poll() is not None or time.monotonic() > deadline):
            _stop(proc, log_path)
            pytest.fail(f"Gunicorn did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    # Ready when a worker answers (the master listens before its worker has loaded Django).
    while True:
        try:
            urllib.request.urlopen(base + "/hooks/nothing-here", timeout=2)  # noqa: S310
        except urllib.error.HTTPError:
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail("Gunicorn's worker did not answer")
            time.sleep(0.1)
    yield Portal(base, proc)
    _stop(proc, log_path)
    log.close()


@pytest.fixture(scope="module")
def hooks_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real Celery worker consuming runs and callbacks (the maintenance queue), on the test database."""
    import redis

    with django_db_blocker.unblock():
        database_url = database_url_for_children()
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).delete("runs", "maintenance", "celery")
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    log = open(log_path, "w")  # noqa: SIM115 - lives as long as the worker
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "runs,maintenance"]
        + ["--concurrency", "2", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"],
        cwd=ROOT,
        env={**os.environ, **CHILD_ENV, "DATABASE_URL": database_url},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield proc
    _stop(proc, log_path)
    log.close()


@dataclass
class Answer:
    status: int
    headers: dict
    data: dict

    @property
    def raw(self) -> dict:
        return self.data


def send(url: str, body: bytes, headers: dict | None = None, method: str = "POST") -> Answer:
    request = urllib.request.Request(url, data=body, method=method)  # noqa: S310
    request.add_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return Answer(response.status, dict(response.headers), json.loads(response.read() or b"{}"))
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            data = json.loads(text)
        except ValueError:
            data = {"text": text.decode("utf-8", "replace")}
        return Answer(exc.code, dict(exc.headers), data)


def signed(secret: str, body: bytes, ts: int | None = None) -> dict:
    ts = int(time.time()) if ts is None else ts
    return {
        webhooks.TIMESTAMP_HEADER: str(ts),
        webhooks.SIGNATURE_HEADER: webhooks.signature(secret, ts, body),
    }


@dataclass
class Received:
    headers: dict
    body: bytes
    at: float


@dataclass
class CallbackReceiver:
    """A real HTTP server on loopback that records every POST and answers ``statuses`` in turn
    (the last one from then on)."""

    statuses: list[int] = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)

    def start(self) -> CallbackReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(Received(dict(self.headers), body, time.time()))
                index = min(len(receiver.received), len(receiver.statuses)) - 1
                self.send_response(receiver.statuses[index])
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format, *args):  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/tollgate-callback"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def callback_receiver():
    receiver = CallbackReceiver().start()
    yield receiver
    receiver.stop()
