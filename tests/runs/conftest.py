"""Fixtures of the run tests that more than one module uses."""

from __future__ import annotations

import os

import pytest
import redis


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
