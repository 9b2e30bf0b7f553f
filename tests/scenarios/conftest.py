"""Fixtures of the scenario tests: the run tests' broker queue, and a saved scenario with secrets."""

from __future__ import annotations

import pytest

from portal.projects.models import personal_project
from portal.runs import starting
from tests.runs.conftest import broker  # noqa: F401 - the Redis queue, emptied around a test

SECRET_HEADER = "X-Api-Key: header-secret-4711"
SECRET_TOKEN = "token-secret-0815"
SCENARIO_DATA = {
    "plain_url": "http://127.0.0.1:9/1k",
    "tls_url": "https://127.0.0.1:9/1k",
    "arms": ["tls", "tls_new"],  # TLS only: the secrets never travel over plain HTTP
    "users": 2,
    "spawn_rate": 2,
    "warmup_s": 0,
    "duration_s": 1,
    "verify_tls": False,
    "headers": SECRET_HEADER,
    "auth": {"type": "bearer", "secret": SECRET_TOKEN},
    "budgets": {"keepalive_tls_p50_ms": 2, "failed_checks": 0},
}


@pytest.fixture
def scenario(owner):
    return starting.save_scenario(personal_project(owner), "ci smoke", dict(SCENARIO_DATA))
