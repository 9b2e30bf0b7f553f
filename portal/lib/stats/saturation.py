"""The saturation search's settings and plan: which loads it steps through (issue 15, DESIGN §7).

Django-free; shared by the engine (``workers.engine.saturation``), the portal (form, API, CLI,
quotas) and the report (``portal.lib.stats.capacity`` judges the points). ``EngineConfig.saturation``::

    {"arms": ["plain", "tls_new"], "mode": "users" | "rate", "start": 1, "max": 64, "factor": 2.0,
     "zoom": 3, "stage_s": 2.0, "warmup_s": 0.5}

``mode`` ``users`` steps the closed-loop users, ``rate`` the open-loop arrival rate (req/s). Coarse
stages multiply the load by ``factor`` from ``start`` up to ``max`` (``max`` itself is the last
one); once a stage is bad (``portal.lib.stats.capacity.verdicts``) the search bisects between the last good
and the first bad load, at most ``zoom`` more stages. Each stage is one ``Swarm.run_arm`` with its own
warm-up (``warmup_s``) and measured window (``stage_s``).
"""

from __future__ import annotations

import math

MODES = ("users", "rate")
DEFAULTS = {"mode": "users", "start": 1, "max": 64, "factor": 2.0, "zoom": 3, "stage_s": 2.0, "warmup_s": 0.5}
MAX_FACTOR = 16.0
MAX_ZOOM = 8
MAX_STAGE_S = 600.0
MIN_STAGE_S = 1.0
# Open loop: how many requests/s one user is asked to send (users = rate / this, at least the run's).
RATE_PER_USER = 20.0
# Bisection stops when the gap is this narrow (rate mode; users stop at adjacent integers).
MIN_RATE_GAP = 1.05


def normalise(value: dict | None, arm_names: list[str]) -> dict | None:
    """The search's settings with defaults filled in and checked; None when there is no search.

    Raises ValueError with a message for the user."""
    if not value:
        return None
    if not isinstance(value, dict):
        raise ValueError('saturation: an object {"arms", "mode", "start", "max", ...}')
    unknown = set(value) - set(DEFAULTS) - {"arms"}
    if unknown:
        raise ValueError(f"saturation: unknown key(s) {', '.join(sorted(unknown))}")
    sat = {**DEFAULTS, **value}
    arms = sat.get("arms") or list(arm_names)
    if isinstance(arms, str):
        arms = [item.strip() for item in arms.split(",") if item.strip()]
    missing = [arm for arm in arms if arm not in arm_names]
    if missing:
        raise ValueError(f"saturation: arm(s) {', '.join(missing)} not among the run's arms")
    sat["arms"] = list(dict.fromkeys(arms))
    if sat["mode"] not in MODES:
        raise ValueError(f"saturation: mode must be one of {', '.join(MODES)}")
    try:
        for key in ("start", "max", "factor", "stage_s", "warmup_s"):
            sat[key] = float(sat[key])
        sat["zoom"] = int(sat["zoom"])
    except (TypeError, ValueError):
        raise ValueError(
            "saturation: start, max, factor, zoom, stage_s and warmup_s must be numbers"
        ) from None
    if sat["mode"] == "users":
        sat["start"], sat["max"] = int(sat["start"]), int(sat["max"])
    _check_ranges(sat)
    return sat


def _check_ranges(sat: dict) -> None:
    if not 0 < sat["start"] <= sat["max"] or not math.isfinite(sat["max"]):
        raise ValueError("saturation: start must be positive and at most max")
    if not 1.1 <= sat["factor"] <= MAX_FACTOR:
        raise ValueError(f"saturation: factor must be between 1.1 and {MAX_FACTOR:g}")
    if not 0 <= sat["zoom"] <= MAX_ZOOM:
        raise ValueError(f"saturation: zoom must be between 0 and {MAX_ZOOM}")
    if not MIN_STAGE_S <= sat["stage_s"] <= MAX_STAGE_S or not 0 <= sat["warmup_s"] <= MAX_STAGE_S:
        raise ValueError(
            f"saturation: stage_s must be between {MIN_STAGE_S:g} s (the generator's CPU is sampled per "
            f"second) and {MAX_STAGE_S:g} s, warmup_s not negative"
        )


def coarse_loads(sat: dict) -> list[float]:
    """The coarse stages' loads: start × factor^k up to max, max itself last."""
    loads: list[float] = []
    load = sat["start"]
    while load < sat["max"] and len(loads) < 64:
        value = math.ceil(load) if sat["mode"] == "users" else round(load, 3)
        if not loads or value > loads[-1]:
            loads.append(value)
        load *= sat["factor"]
    if not loads or loads[-1] < sat["max"]:
        loads.append(sat["max"])
    return loads


def max_stages(sat: dict | None) -> int:
    """Stages per searched arm at most: every coarse stage plus the zoom."""
    return len(coarse_loads(sat)) + sat["zoom"] if sat else 0


def planned_s(sat: dict | None) -> float:
    """The search's seconds at most (all its arms, every stage's warm-up and window)."""
    if not sat:
        return 0.0
    return len(sat["arms"]) * max_stages(sat) * (sat["warmup_s"] + sat["stage_s"])


def stage_users(sat: dict, load: float, run_users: int) -> int:
    """Users of a stage: the load itself (users mode); enough to send the rate (rate mode)."""
    if sat["mode"] == "users":
        return int(load)
    return max(run_users, math.ceil(load / RATE_PER_USER))


def planned_requests(sat: dict | None, per_user_rps: float, run_users: int = 1) -> int:
    """The most requests the search may send: each stage at its load (rate mode) or its users ×
    ``per_user_rps`` (users mode), zoom stages counted at ``max``."""
    if not sat:
        return 0
    loads = coarse_loads(sat) + [sat["max"]] * sat["zoom"]
    rate = sum(load if sat["mode"] == "rate" else load * per_user_rps for load in loads)
    planned = rate * (sat["warmup_s"] + sat["stage_s"]) * len(sat["arms"])
    return int(planned) if math.isfinite(planned) else 2**62


def next_load(sat: dict, points: list[dict], verdicts: list[str]) -> tuple[float, str] | None:
    """The next stage's (load, phase) after ``points`` (in the order run, ``verdicts`` alike), or
    None when the search is over. ``phase``: "coarse" or "zoom"."""
    bad = [p["load"] for p, v in zip(points, verdicts, strict=True) if v != "good"]
    if not bad:
        done = {p["load"] for p in points}
        later = [load for load in coarse_loads(sat) if load not in done and load > max(done, default=0)]
        return (later[0], "coarse") if later else None
    if "generator" in verdicts:
        return None  # beyond a saturated generator nothing more is learnt about the server
    first_bad = min(bad)
    good = [p["load"] for p, v in zip(points, verdicts, strict=True) if v == "good" and p["load"] < first_bad]
    zoomed = sum(1 for p in points if p.get("phase") == "zoom")
    if not good or zoomed >= sat["zoom"]:
        return None
    low = max(good)
    if sat["mode"] == "users":
        if first_bad - low < 2:
            return None
        return (low + first_bad) // 2, "zoom"
    if first_bad / low < MIN_RATE_GAP:
        return None
    return round((low + first_bad) / 2, 3), "zoom"
