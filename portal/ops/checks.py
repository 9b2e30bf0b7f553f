"""What /readyz asks (and the operators' page shows): the database, the broker, the cache, and a
worker consuming the runs queue that reported itself lately (``WorkerSeen``, written every 10 s by
workers/presence.py). Each check answers within a few seconds, with what it found."""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from uuid import uuid4

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils import timezone
from kombu import Connection

from portal.runs.models import WorkerSeen

RUNS_QUEUE = "runs"
TIMEOUT_S = 2.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    ms: float

    def as_dict(self) -> dict:
        return {"ok": self.ok, "detail": self.detail, "ms": self.ms}


def _timed(name: str, probe) -> Check:
    began = time.perf_counter()
    try:
        ok, detail = probe()
    except Exception as exc:  # noqa: BLE001 - whatever went wrong is the answer
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:300]
    return Check(name, ok, detail, round((time.perf_counter() - began) * 1000, 1))


def _database() -> tuple[bool, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return True, connection.vendor


def _broker() -> tuple[bool, str]:
    url = settings.CELERY_BROKER_URL
    options = dict(settings.CELERY_BROKER_TRANSPORT_OPTIONS)
    with Connection(url, transport_options=options, connect_timeout=TIMEOUT_S) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=TIMEOUT_S)
        where = f" {conn.hostname}:{conn.port}" if conn.hostname else ""
        return True, f"{conn.transport_cls}{where}"


def _cache() -> tuple[bool, str]:
    location = settings.CACHES["default"].get("LOCATION", "")
    if isinstance(location, str) and location.startswith(("redis://", "rediss://", "unix://")):
        # The portal's cache forgives a Redis outage (portal/cache.py): ask Redis itself. Imported
        # here: a web process whose cache is not Redis never loads the client (half a second).
        import redis

        client = redis.Redis.from_url(location, socket_connect_timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S)
        try:
            client.ping()
        finally:
            client.close()
        return True, "redis"
    key, value = f"ops:ready:{uuid4().hex}", uuid4().hex
    cache.set(key, value, 10)
    found = cache.get(key) == value
    cache.delete(key)
    return found, "read back" if found else "a value written was not read back"


def _worker() -> tuple[bool, str]:
    since = timezone.now() - timedelta(seconds=settings.TOLLGATE_READY_WORKER_S)
    seen = [
        w
        for w in WorkerSeen.objects.filter(last_seen__gte=since, stopping=False).order_by("-last_seen")
        if RUNS_QUEUE in w.queues
    ]
    if seen:
        return True, f"{len(seen)} worker(s) on the {RUNS_QUEUE} queue, latest {seen[0].name}"
    return (
        False,
        f"no worker on the {RUNS_QUEUE} queue reported in the last {settings.TOLLGATE_READY_WORKER_S} s",
    )


def readiness() -> list[Check]:
    # The database first: the worker check reads it.
    return [
        _timed("database", _database),
        _timed("broker", _broker),
        _timed("cache", _cache),
        _timed("worker", _worker),
    ]


def worker_check() -> Check:
    """A Celery worker on this host (any queue) reported itself within ``TOLLGATE_READY_WORKER_S``
    and is not stopping: the worker containers' healthcheck (their presence thread writes the row)."""
    host = socket.gethostname()
    since = timezone.now() - timedelta(seconds=settings.TOLLGATE_READY_WORKER_S)
    names = list(
        WorkerSeen.objects.filter(host=host, last_seen__gte=since, stopping=False).values_list(
            "name", flat=True
        )
    )
    detail = (
        ", ".join(names) if names else f"no worker of {host} reported in {settings.TOLLGATE_READY_WORKER_S} s"
    )
    return Check("worker", bool(names), detail, 0.0)
