"""Generator hosts of distributed runs (docs/scaling.md): each Celery worker started with
``TOLLGATE_GENERATOR_QUEUE`` consumes ``gen.<name>``; a run's task invites the other live ones to
start Locust workers that join its master (``workers.tasks.join_run``)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import time

from django.conf import settings

from portal.lib.runs.protocol import MAX_GENERATORS

log = logging.getLogger(__name__)
PREFIX = "gen."
INSPECT_TIMEOUT_S = 1.0


def own_name() -> str:
    return settings.TOLLGATE_GENERATOR_NAME or socket.gethostname()


def own_queue() -> str:
    return PREFIX + own_name()


def discover(app) -> list[str]:
    """The other generator hosts' queues to invite: ``TOLLGATE_GENERATOR_HOSTS`` as a list, or with
    "auto" every ``gen.*`` queue a live Celery worker consumes (asked over the broker, 1 s)."""
    wanted = settings.TOLLGATE_GENERATOR_HOSTS.strip()
    if not wanted:
        return []
    if wanted != "auto":
        names = [name.strip() for name in wanted.split(",") if name.strip()]
        return [name if name.startswith(PREFIX) else PREFIX + name for name in names if name != own_queue()]
    try:
        replies = app.control.inspect(timeout=INSPECT_TIMEOUT_S).active_queues() or {}
    except Exception:  # noqa: BLE001 - no broker answer: this host alone
        log.exception("could not ask the workers for their generator queues")
        return []
    queues = {queue["name"] for consumed in replies.values() for queue in consumed or []}
    return sorted(name for name in queues if name.startswith(PREFIX) and name != own_queue())


def advertised(bound_host: str) -> str:
    """The master's address as other generator hosts reach it."""
    if settings.TOLLGATE_MASTER_ADVERTISE:
        return settings.TOLLGATE_MASTER_ADVERTISE
    wildcard = settings.TOLLGATE_MASTER_BIND in ("*", "0.0.0.0")  # noqa: S104 - a setting's value
    return socket.getfqdn() if wildcard else bound_host


def join(master_host: str, master_port: int, processes: int, limit_s: float) -> int:
    """Start Locust workers on this host that join the master; wait until they end (the master tells
    them to quit when the run ends) or ``limit_s`` passes. Returns how many were started."""
    count = processes or min(os.cpu_count() or 1, settings.TOLLGATE_MAX_GENERATORS, MAX_GENERATORS)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "workers.engine.distribution.generator", master_host, str(master_port)]
    procs = [
        subprocess.Popen(  # noqa: S603
            [*command, "--host-label", own_name(), "--siblings", str(count)], cwd=settings.BASE_DIR, env=env
        )
        for _ in range(count)
    ]
    deadline = time.monotonic() + limit_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return count
