"""The portal's private-API code is pinned to the Django release it was written for.

``portal/cache.py``'s ``KeptClient`` keeps one ``redis.Redis`` per connection pool by overriding
``RedisCacheClient.get_client`` with the client's private ``_get_connection_pool`` and ``_client``,
and ``TolerantRedisCache`` installs it through ``RedisCache._class``. None of that is a public API:
an upgrade could break it silently (a new client per call again, or none at all). These tests fail
on any other release until someone has read Django's ``core/cache/backends/redis.py`` again and
moved ``PRIVATE_API_CHECKED_ON``. (``portal/compiled.py`` uses public APIs only; the allauth adapter
is pinned by tests/accounts/test_allauth_pin.py, the engine by tests/workers/test_private_api.py.)
"""

from __future__ import annotations

import inspect
import re

import django
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

from portal import cache
from tests.conftest import ROOT

RECHECK = (
    "portal/cache.py was written for Django {pinned}, this is {running}: read "
    "django/core/cache/backends/redis.py (RedisCache._class, RedisCacheClient.get_client, "
    "_get_connection_pool, _client) of the new release, run tests/runs/test_live_cache.py and "
    "tests/drills/test_redis_restart.py, then move PRIVATE_API_CHECKED_ON"
)


def test_django_is_the_release_the_cache_client_was_written_for():
    pinned = cache.PRIVATE_API_CHECKED_ON["Django"]
    running = ".".join(django.__version__.split(".")[:2])
    assert running == pinned, RECHECK.format(pinned=pinned, running=running)
    requirement = re.search(r"^Django==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert requirement and requirement.group(1).startswith(pinned + "."), (
        "requirements.txt pins another Django"
    )


def test_the_private_parts_the_cache_uses_are_there_with_their_shapes():
    # get_client makes a new client from the pool on every call: KeptClient keeps one per pool.
    source = inspect.getsource(RedisCacheClient.get_client)
    assert "self._get_connection_pool(write)" in source and "self._client(connection_pool=pool)" in source
    assert list(inspect.signature(RedisCacheClient._get_connection_pool).parameters) == ["self", "write"]
    assert "self._class = RedisCacheClient" in inspect.getsource(RedisCache.__init__)
    assert "self._class(" in inspect.getsource(RedisCache._cache.func)
    backend = cache.TolerantRedisCache("redis://127.0.0.1:1/0", {})
    assert isinstance(backend._cache, cache.KeptClient)
    first = backend._cache.get_client()
    assert backend._cache.get_client() is first and backend._cache.get_client(write=True) is first
