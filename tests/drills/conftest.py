"""The fault-drill harness (docs/reliability.md): private servers and the portal's processes, for
tests that break something on purpose and check that every run still ends in a clear state.

Fixtures
- ``private_postgres`` (session): a PostgreSQL cluster of its own (initdb, trust auth, free port,
  socket dir in a temporary directory, run as the ``postgres`` user under root) with a template
  database migrated once (``manage.py migrate``; ``migrate_s`` says how long it took). ``stop(mode)``
  / ``start()`` make it unavailable for as long as a drill wants. Skips where initdb is missing.
- ``drill_db``: a database copied from that template (CREATE DATABASE … TEMPLATE, about 0.1 s) for
  one test. The test process's Django connection points at it for the test (ORM helpers work without
  ``django_db``); ``.url`` is what the stack's children get.
- ``private_redis``: redis-server on a free port, no persistence: the broker and the cache of the
  stack. ``restart(down_s=0)``, ``stop()``, ``start()``, ``url(db)``.
- ``stack``: ``tests.drills.stack.Stack`` on those two: ``worker(name, queues)``, ``maintenance()``,
  ``portal()``, ``restart_web()``, ``dispatch(run)``, ``stack[name].kill()/pause()/resume()/
  terminate()/restart()``; every process (and what it started) is ended at teardown, and the logs
  are printed (pytest shows them when the drill failed).
- ``drill_owner``: a user with a personal project (password ``tests.drills.runs.PASSWORD``).
The local target is the shared ``plain_server`` / ``tls_server`` (tests/servers.py, loopback).
Helpers to queue runs, wait for states and read progress over HTTP: ``tests.drills.runs``.

Every test here carries the ``drill`` marker: ``pytest -m drill`` runs the drills alone.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connections

from tests.conftest import ROOT
from tests.drills.runs import make_owner
from tests.drills.services import PrivatePostgres, PrivateRedis, postgres_bin
from tests.drills.stack import Stack

HERE = Path(__file__).resolve().parent
TEMPLATE = "drill_template"


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.drill)


def _postgres_unavailable() -> str | None:
    if postgres_bin() is None:
        return "initdb not found (Debian: apt-get install postgresql; /usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "initdb refuses root and there is no postgres system user to run it as"
    return None


@pytest.fixture(scope="session")
def private_postgres():
    """A private cluster with the migrated template database (see the module's docstring)."""
    reason = _postgres_unavailable()
    if reason:
        pytest.skip(reason)
    server = PrivatePostgres(postgres_bin())
    try:
        began = time.monotonic()
        server.init().start()
        server.start_s = time.monotonic() - began
        server.execute(f"CREATE DATABASE {TEMPLATE}")
        began = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        done = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env | {"DATABASE_URL": server.url(TEMPLATE), "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        server.migrate_s = time.monotonic() - began
        assert done.returncode == 0, f"migrate failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        yield server
    finally:
        server.destroy()


@dataclass
class DrillDatabase:
    name: str
    url: str


def _point_django_at(settings_dict: dict) -> None:
    connection = connections["default"]
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(settings_dict)


@pytest.fixture
def drill_db(private_postgres, django_db_blocker):
    """A fresh copy of the migrated template for this test; Django's default connection uses it."""
    name = f"drill_{uuid.uuid4().hex[:12]}"
    began = time.monotonic()
    private_postgres.execute(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
    copy_s = time.monotonic() - began
    saved = dict(connections["default"].settings_dict)
    ours = {"NAME": name, "HOST": "127.0.0.1", "PORT": private_postgres.port, "USER": "postgres"}
    _point_django_at(saved | ours | {"PASSWORD": "", "CONN_MAX_AGE": 0})
    try:
        with django_db_blocker.unblock():
            yield DrillDatabase(name, private_postgres.url(name))
    finally:
        _point_django_at(saved)
        print(
            f"private PostgreSQL: initdb + start {private_postgres.start_s:.1f} s, template migrated in "
            f"{private_postgres.migrate_s:.1f} s, {name} copied from it in {copy_s:.2f} s"
        )
        if not private_postgres.running:  # a drill that stopped it and failed before starting it
            private_postgres.start()
        private_postgres.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def private_redis(tmp_path):
    server = PrivateRedis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def stack(tmp_path, drill_db, private_redis):
    """The portal's processes on the private database and Redis (none started yet)."""
    processes = Stack(tmp_path, drill_db.url, private_redis.url(0))
    try:
        yield processes
    finally:
        processes.close()
        print(processes.logs(12000))


@pytest.fixture
def drill_owner(drill_db):
    return make_owner()
