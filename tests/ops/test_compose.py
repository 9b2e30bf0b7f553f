"""docker-compose.yml's healthchecks run as written (Docker is not here: the commands are)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.ops.conftest import seen

COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def _test_of(service: str) -> list[str]:
    check = COMPOSE["services"][service]["healthcheck"]["test"]
    assert check[0] == "CMD" and check[1] == "python"
    return [sys.executable, *check[2:]]


def test_every_worker_container_checks_its_own_presence():
    for service in ("worker", "generator", "maintenance"):
        assert _test_of(service)[1:] == ["manage.py", "tollgate", "healthcheck", "worker"], service


@pytest.mark.django_db(transaction=True)
def test_the_web_healthcheck_follows_readyz(live_server):
    command = [part.replace("http://127.0.0.1:8000", live_server.url) for part in _test_of("web")]
    assert any("/readyz" in part for part in command)
    failing = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert failing.returncode == 1 and "503" in failing.stderr  # no run worker yet
    seen("celery@gen1", "gen1", ["runs"])
    ready = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert ready.returncode == 0, ready.stderr[-1000:]
