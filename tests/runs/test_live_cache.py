"""The live cache is best-effort: with Redis refusing connections the cache helpers answer a miss,
the progress JSON and the report of a run answer from the database, and the process leaves the
cache alone for CACHE_RETRY_S after an error (one timeout per period, not one per message)."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from portal.runs import live, reporting
from portal.runs.models import Run
from tests.runs.factories import make_run
from tests.servers import closed_port


def _refusing(monkeypatch, backend: str):
    """The cache on a loopback port where nothing listens (a Redis that is down)."""
    monkeypatch.setitem(live._cache_down_until, "at", 0.0)  # restored after the test
    location = f"redis://127.0.0.1:{closed_port()}/0"
    pages = settings.CACHES["pages"]  # the rendered pages stay in the process's memory
    return override_settings(CACHES={"default": {"BACKEND": backend, "LOCATION": location}, "pages": pages})


@pytest.fixture
def refusing_cache(monkeypatch):
    """The portal's own backend (portal/cache.py), as configured with Redis."""
    with _refusing(monkeypatch, "portal.cache.TolerantRedisCache"):
        yield


@pytest.fixture
def refusing_plain_cache(monkeypatch):
    """Django's RedisCache, which raises: what the live helpers guard against on any backend."""
    with _refusing(monkeypatch, "django.core.cache.backends.redis.RedisCache"):
        yield


def test_the_helpers_answer_a_miss_and_then_rest(refusing_plain_cache):
    assert live.cache_set("drill-key", 1, 60) is False
    resting_until = live._cache_down_until["at"]
    assert resting_until > time.monotonic() + live.CACHE_RETRY_S - 1
    assert live.cache_get("drill-key", "missing") == "missing"
    live.cache_delete("drill-key", "other-key")  # raises nothing
    assert live._cache_down_until["at"] == resting_until  # resting: no new attempt, no new error


@pytest.mark.django_db
def test_progress_and_report_answer_from_the_database(refusing_cache, client, owner):
    running = make_run(owner, status=Run.Status.RUNNING, arms={"plain": [400, 420]})
    client.force_login(owner)
    answer = client.get(reverse("runs-progress", args=[running.code]))
    assert answer.status_code == 200
    data = answer.json()
    assert data["status"] == "running" and data["series"][0]["arm"] == "plain"
    assert "arm" not in data  # no live state without the cache

    ended = make_run(owner, status=Run.Status.SUCCEEDED, arms={"plain": [400], "tls": [900]})
    page = reporting.report_page(ended)  # computed, stored in the database, the cache skipped
    assert set(page["report"]["arms"]) == {"plain", "tls"}
    assert client.get(reverse("runs-detail", args=[ended.code])).status_code == 200
