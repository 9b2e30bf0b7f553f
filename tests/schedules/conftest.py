"""A saved scenario against local servers (tiny load), and the broker's maintenance queue."""

from __future__ import annotations

import base64
import json
import os

import pytest
import redis

from portal.projects.models import personal_project
from portal.runs import starting
from tests.api.conftest import bearer  # noqa: F401 - a fixture: tokens of the API tests
from tests.gunicorn_portal import gunicorn_portal  # noqa: F401 - a fixture

LOAD = {"users": 2, "spawn_rate": 50, "warmup_s": 0.3, "duration_s": 1.0, "arrival_rate": 80}


@pytest.fixture
def maintenance_queue():
    """The broker's ``maintenance`` and ``runs`` queues (where the beat's ticks and the runs they
    start go), emptied around the test."""
    client = redis.Redis.from_url(os.environ["CELERY_BROKER_URL"])
    client.delete("maintenance", "runs")
    yield client
    client.delete("maintenance", "runs")


def popped_tasks(client, queue: str = "maintenance") -> list[dict]:
    """The task messages waiting in ``queue``: ``{"task", "id", "args", "kwargs"}`` each."""
    found = []
    while (raw := client.rpop(queue)) is not None:
        message = json.loads(raw)
        args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        headers = message["headers"]
        found.append({"task": headers["task"], "id": headers["id"], "args": args, "kwargs": kwargs})
    return found


@pytest.fixture
def local_scenario(owner, plain_server, tls_server):
    return starting.save_scenario(
        personal_project(owner),
        "nightly",
        {
            "plain_url": plain_server.url(),
            "tls_url": tls_server.url(),
            "arms": ["tls"],
            "verify_tls": False,
            **LOAD,
        },
    )
