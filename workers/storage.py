"""Writes that outlast a database outage: retried with back-off while PostgreSQL is unreachable.

The engine keeps measuring while the database is away; what it reports is kept in memory by the
executor (``workers.driver.EngineProcess``) and written once the database answers again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

log = logging.getLogger(__name__)

# How long a write keeps trying before the error is raised (an outage longer than this fails the run).
DB_RETRY_S = 180.0
UNAVAILABLE = (OperationalError, InterfaceError)
T = TypeVar("T")


def reset() -> None:
    """Drop this thread's broken connection; the next query opens a new one."""
    with contextlib.suppress(UNAVAILABLE):
        connection.close()


def retrying(write: Callable[[], T], what: str, limit_s: float = DB_RETRY_S) -> T:
    """``write()``, again after 0.5, 1, 2, 4, 5, 5 … s while the database is unavailable, for up to
    ``limit_s``; then its last error."""
    deadline = time.monotonic() + limit_s
    delay_s = 0.5
    while True:
        try:
            return write()
        except UNAVAILABLE as exc:
            if time.monotonic() >= deadline:
                raise
            log.warning("%s: database unavailable (%s); trying again in %.1f s", what, exc, delay_s)
            reset()
            time.sleep(delay_s)
            delay_s = min(delay_s * 2, 5.0)
