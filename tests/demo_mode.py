"""pytest plugin: the tests run in demo mode (``TOLLGATE_DEMO=1``) unless the environment says otherwise,
and may reach loopback and nothing else (``TOLLGATE_ALLOW_NETWORKS``, always).

Loaded with ``-p tests.demo_mode`` from pyproject.toml's addopts, i.e. before pytest-django imports
the settings (a conftest.py would be too late). Subprocesses of the tests inherit the variable.
In demo mode the settings generate SECRET_KEY into ``var/secret_key`` and derive the Fernet key
from it; outside it they refuse to start without real secrets (see tests/test_settings.py).
The outbound address policy allows loopback only, whatever the environment says: the tests'
servers are all on loopback, and the policy tests expect every other range refused.
"""

from __future__ import annotations

import os

LOOPBACK = "127.0.0.0/8,::1/128"

os.environ.setdefault("TOLLGATE_DEMO", "1")
# The demo samples its own target process on the generator host; tests of the default turn it off.
os.environ.setdefault("TOLLGATE_LOCAL_PROBE", "1")
os.environ["TOLLGATE_ALLOW_NETWORKS"] = LOOPBACK
# Test accounts' passwords hashed in one cheap round (demo mode only, portal/settings.py): PBKDF2's
# million rounds cost 0.3 CPU-s per account and login, most of a CPU-bound suite's minutes.
# Subprocesses (Celery workers, Gunicorn) inherit it and verify the same hashes.
os.environ.setdefault("TOLLGATE_TEST_FAST_PASSWORD_HASHES", "1")


def own_redis_db(url: str, worker: str) -> str:
    """Under pytest-xdist each worker gets its own Redis database (broker queues, cache, rate
    limits), as pytest-django gives it its own PostgreSQL database: worker gwN uses the base
    database minus N, so gw0 keeps the one the environment names."""
    base, _, db = url.rpartition("/")
    if not worker.startswith("gw") or not db.isdigit():
        return url
    return f"{base}/{(int(db) - int(worker[2:])) % 16}"


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
for _name in ("CELERY_BROKER_URL", "REDIS_URL"):
    if _worker and os.environ.get(_name, "").startswith("redis"):
        os.environ[_name] = own_redis_db(os.environ[_name], _worker)
