"""Live state of a running run in the cache: written by the worker, read by the progress view.

The one place both sides agree on the cache keys; nothing here is durable (the database is).
"""

from __future__ import annotations

PROGRESS_TTL_S = 3600


def progress_key(code) -> str:
    """The engine's latest progress message (phase, arm, elapsed, req/s) of run ``code``."""
    return f"run-progress:{code}"


def probing_key(code) -> str:
    """What the probes are doing after the load (openssl speed takes half a minute)."""
    return f"run-probing:{code}"
