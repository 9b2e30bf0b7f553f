"""A run in flight: its live state in the cache (written by the worker, read by the progress view),
and why a queued run has not started.

The one place both sides agree on the cache keys and on the live per-second points; nothing in the
cache is durable (the database is). ``progress_data`` is the progress JSON of the run page.

Cache access is best-effort (``cache_get``, ``cache_set``, ``cache_delete``): while Redis is down or
restarting, a run goes on and ends with every arm it measured, and the progress view answers from the
database (status, elapsed time since the start, the stored arms' points) instead of failing.

A queued run either says why a worker holds it back (``Run.waiting``: a full generator or project, a
resumption) or, once it has waited a little, what the workers are doing (``queue_note``): none
consuming the runs queue has reported lately (``WorkerSeen``, written by workers/presence.py), or
they are all busy.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max
from django.utils import timezone

from portal.runs.models import Run, WorkerSeen

# The per-second figures drawn live, the same the report's time charts use (ArmResult.series).
LIVE_FIELDS = ("requests", "p50_us", "p95_us")

PROGRESS_TTL_S = 3600
# After a cache error this process leaves the cache alone this long: a Redis that hangs (or refuses)
# costs one timeout per period, not one per progress message, and one warning per outage is logged.
CACHE_RETRY_S = 5.0

log = logging.getLogger(__name__)
_cache_down_until = {"at": 0.0}


def _cache_resting() -> bool:
    return time.monotonic() < _cache_down_until["at"]


def _unavailable(action: str, key: str, exc: Exception) -> None:
    _cache_down_until["at"] = time.monotonic() + CACHE_RETRY_S
    log.warning(
        "cache unavailable (%s %s): %s; going on without it for %.0f s", action, key, exc, CACHE_RETRY_S
    )


# The cache is a convenience, never the record: any error of its backend (redis-py's connection and
# timeout errors, the file cache's OSError) is logged and answered as a miss.
def cache_get(key: str, default=None):
    """``cache.get``, or ``default`` when the cache is unavailable."""
    if _cache_resting():
        return default
    try:
        return cache.get(key, default)
    except Exception as exc:  # noqa: BLE001 - see above
        _unavailable("get", key, exc)
        return default


def cache_set(key: str, value, timeout_s: float) -> bool:
    """``cache.set``; False (and nothing raised) when the cache is unavailable."""
    if _cache_resting():
        return False
    try:
        cache.set(key, value, timeout_s)
        return True
    except Exception as exc:  # noqa: BLE001 - see above
        _unavailable("set", key, exc)
        return False


def cache_delete(*keys: str) -> None:
    """``cache.delete`` of each key; an unavailable cache is skipped (live keys expire on their own)."""
    for key in keys:
        if _cache_resting():
            return
        try:
            cache.delete(key)
        except Exception as exc:  # noqa: BLE001 - see above
            _unavailable("delete", key, exc)


def progress_key(code) -> str:
    """The engine's latest progress message (phase, arm, elapsed, req/s) of run ``code``."""
    return f"run-progress:{code}"


def probing_key(code) -> str:
    """What the probes are doing after the load (openssl speed takes half a minute)."""
    return f"run-probing:{code}"


def with_point(message: dict, previous: dict | None) -> dict:
    """The engine's progress ``message`` with ``series``: the measured seconds of its arm so far
    (``previous`` is the last stored message). A message of a new arm (or round) starts afresh; one
    without a ``second`` (warm-up) keeps what was there."""
    same_arm = previous is not None and previous.get("arm_index") == message.get("arm_index")
    series = dict(previous["series"]) if same_arm and previous.get("series") else {}
    series = {field: list(series.get(field, [])) for field in LIVE_FIELDS}
    second = message.get("second")
    if second:
        for field in LIVE_FIELDS:
            series[field].append(second.get(field))
    return {**message, "series": series}


def live_series(run: Run, live: dict | None) -> list[dict]:
    """Per arm, in run order: its measured seconds so far (rounds one after another, as the report
    draws them) and its state: ``measured``, ``cut short`` (cancelled while measured), or
    ``warming up`` / ``measuring`` for the arm the engine is on (from the cache; the others from the
    database)."""
    arms: dict[str, dict] = {}
    stored = run.arms.order_by("position").values_list("arm", "complete", "series")
    for name, complete, series in stored:
        entry = arms.setdefault(name, {"arm": name, "state": "measured", **{f: [] for f in LIVE_FIELDS}})
        if not complete:
            entry["state"] = "cut short"
        for field in LIVE_FIELDS:
            entry[field].extend(point.get(field) for point in series)
    # Until its stored row arrives the arm is still measuring; afterwards the row has its points.
    if live and live.get("arm_index", 0) >= len(stored) and live.get("series"):
        name = live["arm"]
        entry = arms.setdefault(name, {"arm": name, **{f: [] for f in LIVE_FIELDS}})
        entry["state"] = "warming up" if live.get("phase") == "warmup" else "measuring"
        for field in LIVE_FIELDS:
            entry[field].extend(live["series"].get(field, []))
    return list(arms.values())


def progress_data(run: Run) -> dict:
    """What the run page polls: status, the arm and phase the engine is in, and the per-second
    points of every arm measured so far (``series``), while the run is running."""
    data = {
        "id": str(run.code),
        "status": run.status,
        "terminal": run.is_terminal,
        "error": run.error or None,
        "arms": run.arm_names,
        "started": run.started.isoformat() if run.started else None,
        "finished": run.finished.isoformat() if run.finished else None,
        # A queued run says what holds it back: a full generator or project, a resumption, or no
        # worker present to take it (``queue_note``).
        "waiting": queue_note(run),
    }
    running = run.status == Run.Status.RUNNING
    live = cache_get(progress_key(run.code)) if running else None
    if live:
        planned = live.get("planned_s") or 0
        data.update(
            arm=live["arm"],
            arm_index=live.get("arm_index", 0),
            arms_total=live.get("arms_total", len(run.arm_names)),
            rounds=run.config.get("rounds", 1),
            phase=live["phase"],
            arms_done=live.get("arms_done", []),
            elapsed_s=live["elapsed_s"],
            planned_s=planned,
            remaining_s=max(0.0, round(planned - live["elapsed_s"], 1)),
            fraction=min(1.0, live["elapsed_s"] / planned) if planned else 0.0,
            rps=live["rps"],
            users=live["users"],
        )
    if running:
        data["series"] = live_series(run, live)
    probing = cache_get(probing_key(run.code)) if running else None
    if probing:
        data["probing"] = probing
    elif running and run.started and not live:
        data["elapsed_s"] = round((timezone.now() - run.started).total_seconds(), 1)
    return data


RUNS_QUEUE = "runs"
# A fresh run is normally taken within a second or two; after this the page explains the wait.
QUIET_S = 10


def _ago(moment: datetime, now: datetime) -> str:
    seconds = max(0, int((now - moment).total_seconds()))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min"


def _consumers() -> list[WorkerSeen]:
    """Workers that consume the runs queue, as they last reported, latest first."""
    return [w for w in WorkerSeen.objects.order_by("-last_seen") if RUNS_QUEUE in w.queues]


def _present(consumers: list[WorkerSeen], now: datetime) -> list[WorkerSeen]:
    fresh = now - timedelta(seconds=settings.TOLLGATE_WORKER_SEEN_S)
    return [w for w in consumers if w.last_seen >= fresh and not w.stopping]


def runs_workers_present(now: datetime | None = None) -> bool:
    """Whether a worker consuming the runs queue reported in the last ``TOLLGATE_WORKER_SEEN_S`` and
    is not stopping: someone would take a run put back in the queue."""
    return bool(_present(_consumers(), now or timezone.now()))


def queue_note(run: Run, now: datetime | None = None) -> str | None:
    """``None`` for a run that is not queued, else what it is waiting for, in words."""
    if run.status != Run.Status.QUEUED:
        return None
    now = now or timezone.now()
    # Since it was put back in the queue (its last attempt's end), or created.
    since = run.attempts.aggregate(requeued=Max("ended"))["requeued"] or run.created
    waited = (now - since).total_seconds()
    if run.waiting and not run.waiting.startswith("resuming:"):
        return run.waiting
    prefix = f"{run.waiting[:1].upper()}{run.waiting[1:]}. " if run.waiting else ""
    if waited < QUIET_S:
        return f"{prefix}Waiting for a worker…"
    consumers = _consumers()
    present = _present(consumers, now)
    queued_for = f"Queued for {_ago(since, now)}"
    if not present:
        last = (
            f"the last one, {consumers[0].name}, {_ago(consumers[0].last_seen, now)} ago"
            if consumers
            else "none ever has"
        )
        return (
            f"{prefix}{queued_for} and no worker has taken it: no worker consuming the {RUNS_QUEUE} queue "
            f"has "
            f"reported in the last {settings.TOLLGATE_WORKER_SEEN_S} s ({last}). It starts when one does."
        )
    busy = Run.objects.filter(status=Run.Status.RUNNING).count()
    return (
        f"{prefix}{queued_for}: {len(present)} worker(s) consuming the {RUNS_QUEUE} queue are present "
        f"and {busy} run(s) are running; it starts when one is free."
    )
