"""Live state of a running run in the cache: written by the worker, read by the progress view.

The one place both sides agree on the cache keys and on the live per-second points; nothing in the
cache is durable (the database is). ``progress_data`` is the progress JSON of the run page.
"""

from __future__ import annotations

from django.core.cache import cache
from django.utils import timezone

from portal.runs.models import Run
from portal.runs.queueing import queue_note

# The per-second figures drawn live, the same the report's time charts use (ArmResult.series).
LIVE_FIELDS = ("requests", "p50_us", "p95_us")

PROGRESS_TTL_S = 3600


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
        # worker present to take it (portal/runs/queueing.py).
        "waiting": queue_note(run),
    }
    running = run.status == Run.Status.RUNNING
    live = cache.get(progress_key(run.code)) if running else None
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
    if running and cache.get(probing_key(run.code)):
        data["probing"] = cache.get(probing_key(run.code))
    elif running and run.started and not live:
        data["elapsed_s"] = round((timezone.now() - run.started).total_seconds(), 1)
    return data
