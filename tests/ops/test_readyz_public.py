"""/readyz on Gunicorn, read as an anonymous client while the portal's Redis is down: ready or
not, and nothing more (no address, worker name or exception text); the detail is in the log."""

from __future__ import annotations

import pytest
import requests

from tests.drills.services import PrivateRedis
from tests.gunicorn_portal import start_portal
from tests.ops.conftest import seen


@pytest.mark.django_db(transaction=True)
def test_readyz_says_ready_or_not_and_nothing_more_with_redis_down(tmp_path):
    redis = PrivateRedis(tmp_path)
    if redis.binary is None:
        pytest.skip("redis-server not installed")
    redis.start()
    portal = None
    try:
        portal = start_portal(tmp_path, redis.url(0))
        seen("celery@gen-7c1e", "gen-7c1e", ["runs"])
        ready = requests.get(portal.base_url + "/readyz", timeout=30)
        assert ready.status_code == 200 and ready.json() == {"status": "ok"}, ready.text

        redis.stop()
        down = requests.get(portal.base_url + "/readyz", timeout=30)
        assert down.status_code == 503
        assert down.json() == {"status": "unavailable"}, down.text
        for secret in (str(redis.port), "gen-7c1e", "Error", "refused", "redis", "broker"):
            assert secret not in down.text
        # The operators' detail is in the portal's log.
        log = portal["web"].log_tail(50_000)
        assert "/readyz: broker failing" in log and "/readyz: cache failing" in log
        assert f"127.0.0.1:{redis.port}" in log
    finally:
        if portal is not None:
            print(portal.logs())
            portal.close()
        redis.stop()
