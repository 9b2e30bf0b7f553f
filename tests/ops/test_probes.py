"""/healthz and /readyz: what a load balancer and docker-compose's healthchecks ask."""

from __future__ import annotations

import pytest
from django.core.cache import caches

from portal.ops import checks
from tests.drills.services import PrivateRedis, free_port
from tests.ops.conftest import seen


def found() -> dict[str, dict]:
    """What operators see (/ops/, ``tollgate healthcheck ready --json``): each check with its detail."""
    return {c.name: c.as_dict() for c in checks.readiness()}


def ready(client, status: int) -> None:
    """/readyz answers ``status`` and says ready or not, nothing more (it is public)."""
    response = client.get("/readyz")
    assert response.status_code == status, response.content
    assert response.json() == {"status": "ok" if status == 200 else "unavailable"}


def test_healthz_answers_without_touching_the_database(client):
    # No django_db mark: a query would raise here.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_and_readyz_are_get_only(client):
    assert client.post("/healthz").status_code == 405


@pytest.fixture
def own_redis(tmp_path):
    if PrivateRedis(tmp_path).binary is None:
        pytest.skip("redis-server not installed")
    server = PrivateRedis(tmp_path).start()
    yield server
    server.stop()


def _point_at(settings, url: str) -> None:
    """Broker and cache on ``url`` for this test (the machine's Redis is left alone)."""
    settings.CELERY_BROKER_URL = url
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}
    settings.CACHES = {"default": {"BACKEND": "portal.cache.TolerantRedisCache", "LOCATION": url}}


@pytest.mark.django_db
def test_readyz_fails_while_redis_is_stopped_and_recovers(client, settings, own_redis, caplog):
    _point_at(settings, own_redis.url(3))
    seen("celery@gen1", "gen1", ["runs"])
    ready(client, 200)
    body = found()
    assert set(body) == {"database", "broker", "cache", "worker"}
    assert f":{own_redis.port}" in body["broker"]["detail"]

    own_redis.stop()
    caches.close_all()
    ready(client, 503)
    body = found()
    assert not body["broker"]["ok"] and not body["cache"]["ok"]
    assert "Connection" in body["cache"]["detail"] or "refused" in body["cache"]["detail"].lower()
    assert body["database"]["ok"] and body["worker"]["ok"]
    # Each failing check gave up within its timeout, not a client's patience.
    assert body["broker"]["ms"] < 6000 and body["cache"]["ms"] < 6000
    # The detail /readyz keeps to itself is in the log.
    logged = [r.getMessage() for r in caplog.records if r.name == "portal.ops.views"]
    assert any(line.startswith("/readyz: broker failing") and str(own_redis.port) in line for line in logged)

    own_redis.start()
    ready(client, 200)


@pytest.mark.django_db
def test_readyz_fails_on_a_closed_broker_port(client, settings):
    _point_at(settings, f"redis://127.0.0.1:{free_port()}/0")
    seen("celery@gen1", "gen1", ["runs"])
    ready(client, 503)
    assert {name for name, c in found().items() if not c["ok"]} == {"broker", "cache"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("ago_s", "queues", "stopping"),
    [
        (90, ["runs"], False),  # silent for longer than TOLLGATE_READY_WORKER_S (60 s)
        (1, ["runs"], True),  # warm shutdown under way: takes no new run
        (1, ["maintenance", "celery"], False),  # present, but no run worker
    ],
)
def test_readyz_wants_a_run_worker_seen_in_the_last_minute(client, ago_s, queues, stopping):
    seen("celery@gen1", "gen1", queues, ago_s=ago_s, stopping=stopping)
    ready(client, 503)
    body = found()
    assert not body["worker"]["ok"]
    assert "no worker on the runs queue reported in the last 60 s" in body["worker"]["detail"]
    assert body["database"]["ok"] and body["broker"]["ok"] and body["cache"]["ok"]


@pytest.mark.django_db
def test_readyz_is_ok_with_a_fresh_run_worker(client):
    seen("celery@old", "old", ["runs"], ago_s=600)
    seen("celery@gen2", "gen2", ["runs", "gen.gen2"], ago_s=50)
    ready(client, 200)
    assert "celery@gen2" in found()["worker"]["detail"]
