"""/healthz and /readyz: what a load balancer and docker-compose's healthchecks ask."""

from __future__ import annotations

import pytest
from django.core.cache import caches

from tests.drills.services import PrivateRedis, free_port
from tests.ops.conftest import seen


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
def test_readyz_fails_while_redis_is_stopped_and_recovers(client, settings, own_redis):
    _point_at(settings, own_redis.url(3))
    seen("celery@gen1", "gen1", ["runs"])
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.json()
    body = ready.json()
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "broker", "cache", "worker"}
    assert f":{own_redis.port}" in body["checks"]["broker"]["detail"]

    own_redis.stop()
    caches.close_all()
    down = client.get("/readyz")
    assert down.status_code == 503
    checks = down.json()["checks"]
    assert down.json()["status"] == "unavailable"
    assert not checks["broker"]["ok"] and not checks["cache"]["ok"]
    assert "Connection" in checks["cache"]["detail"] or "refused" in checks["cache"]["detail"].lower()
    assert checks["database"]["ok"] and checks["worker"]["ok"]
    # Each failing check gave up within its timeout, not a client's patience.
    assert checks["broker"]["ms"] < 6000 and checks["cache"]["ms"] < 6000

    own_redis.start()
    assert client.get("/readyz").status_code == 200


@pytest.mark.django_db
def test_readyz_fails_on_a_closed_broker_port(client, settings):
    _point_at(settings, f"redis://127.0.0.1:{free_port()}/0")
    seen("celery@gen1", "gen1", ["runs"])
    response = client.get("/readyz")
    assert response.status_code == 503
    assert {name for name, c in response.json()["checks"].items() if not c["ok"]} == {"broker", "cache"}


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
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert not checks["worker"]["ok"]
    assert "no worker on the runs queue reported in the last 60 s" in checks["worker"]["detail"]
    assert checks["database"]["ok"] and checks["broker"]["ok"] and checks["cache"]["ok"]


@pytest.mark.django_db
def test_readyz_is_ok_with_a_fresh_run_worker(client):
    seen("celery@old", "old", ["runs"], ago_s=600)
    seen("celery@gen2", "gen2", ["runs", "gen.gen2"], ago_s=50)
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert "celery@gen2" in response.json()["checks"]["worker"]["detail"]
