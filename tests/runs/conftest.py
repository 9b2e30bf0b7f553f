"""Fixtures of the run tests that more than one module uses."""

from __future__ import annotations

import os

import pytest
import redis

from tests.gunicorn_portal import gunicorn_portal  # noqa: F401 - a fixture
from tests.servers import LocalServer


@pytest.fixture
def broker():
    """The Redis broker's ``runs`` queue, emptied before and after the test."""
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis"):
        pytest.fail("the tests need CELERY_BROKER_URL=redis://… (make test sets it)")
    client = redis.Redis.from_url(url)
    client.delete("runs")
    yield client
    client.delete("runs")


@pytest.fixture
def server_with():
    """Start local servers (LocalServer keyword arguments) that stop after the test."""
    started = []

    def start(**kwargs) -> LocalServer:
        server = LocalServer(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
