"""The Redis cache, but a Redis outage never fails a request: reads miss, writes are skipped.

Redis is only the broker and a cache here (PostgreSQL holds everything): sessions are read through
it (``cached_db`` falls back to the database on a miss), the project switcher, stored reports and the
runs' live progress are kept in it. Without this, Django's RedisCache raises on every call while Redis
is away and each logged-in page would answer 500 (tests/drills/test_redis_restart.py).

``KeptClient`` reaches into Django's Redis backend (``RedisCache._class``,
``RedisCacheClient._get_connection_pool`` and ``_client``): they were read for the Django release
``PRIVATE_API_CHECKED_ON`` names, and tests/test_private_api.py fails on any other until someone has
read them again. The rest overrides the cache API's public methods.
"""

from __future__ import annotations

import logging
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)
# The Django release whose Redis backend KeptClient was written against (requirements.txt pins it).
PRIVATE_API_CHECKED_ON = {"Django": "5.2"}

DOWN = (RedisConnectionError, RedisTimeoutError, OSError)
# After a failure, skip Redis this long (one timeout every few seconds instead of one per call).
RETRY_S = 5.0


class KeptClient(RedisCacheClient):
    """Django's client, but with one ``redis.Redis`` per connection pool instead of a new one per call
    (its constructor fills a table of response callbacks: 0.06 ms of CPU with redis 8.1, twice on
    every logged-in page, a tenth of a kept run page's view). A ``redis.Redis`` takes a connection
    from its pool for each command, so sharing it is safe."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, object] = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class TolerantRedisCache(RedisCache):
    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = KeptClient
        self._down_until = 0.0  # per instance: Django keeps one per thread

    def _resting(self) -> bool:
        return time.monotonic() < self._down_until

    def _failed(self, action: str, exc: Exception) -> None:
        self._down_until = time.monotonic() + RETRY_S
        log.warning("cache unavailable (%s): %s; going on without it for %.0f s", action, exc, RETRY_S)

    def _try(self, action: str, call, fallback):
        if self._resting():
            return fallback
        try:
            return call()
        except DOWN as exc:
            self._failed(action, exc)
            return fallback

    def get(self, key, default=None, version=None):
        return self._try("get", lambda: super(TolerantRedisCache, self).get(key, default, version), default)

    def get_many(self, keys, version=None):
        return self._try("get_many", lambda: super(TolerantRedisCache, self).get_many(keys, version), {})

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        self._try("set", lambda: super(TolerantRedisCache, self).set(key, value, timeout, version), None)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._try(
            "set_many", lambda: super(TolerantRedisCache, self).set_many(data, timeout, version), list(data)
        )

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._try(
            "add", lambda: super(TolerantRedisCache, self).add(key, value, timeout, version), False
        )

    def delete(self, key, version=None):
        return self._try("delete", lambda: super(TolerantRedisCache, self).delete(key, version), False)

    def delete_many(self, keys, version=None):
        self._try("delete_many", lambda: super(TolerantRedisCache, self).delete_many(keys, version), None)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._try("touch", lambda: super(TolerantRedisCache, self).touch(key, timeout, version), False)

    def has_key(self, key, version=None):
        return self._try("has_key", lambda: super(TolerantRedisCache, self).has_key(key, version), False)
