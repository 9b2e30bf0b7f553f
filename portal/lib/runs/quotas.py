"""Quotas: how much load one project may ask of the generator, and how often.

Django-free: ``check`` judges a run's engine config (``protocol.EngineConfig`` as a dict) against a
project's ``Limits``; ``check_counts`` its runs in flight and of the last 24 hours. Where the limits
come from (the operator's defaults in settings, a project's own ``ProjectQuota``) is
``portal.runs.quotas``. Every message names the project and says that an operator set the limit.

Requests per run are *planned*, not counted: open loop, the schedule is the plan (rate × (warm-up +
duration) × arms × rounds); closed loop, each user is assumed to send at most
``CLOSED_LOOP_RPS_PER_USER`` requests a second (at most one per think time when there is one), an
upper bound for one Locust user on one generator. The engine has no request budget of its own. A
saturation search (``portal.lib.stats.saturation``) counts too: every stage it may run, at its load, and its
``max`` load is held to the users or arrival-rate limit.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass

from portal.lib.stats import saturation
from portal.lib.tls import matrix

# A closed-loop user waits for each answer: about 1 ms per request is the floor on loopback.
CLOSED_LOOP_RPS_PER_USER = 1000.0
DAY_S = 86400


@dataclass(frozen=True)
class Limits:
    max_users: int
    max_arrival_rate: float
    max_duration_s: float
    max_warmup_s: float
    max_rounds: int
    max_requests_per_run: int
    max_concurrent_runs: int
    max_runs_per_day: int
    max_generators: int = 16  # Locust worker processes per generator host (0 in a config: auto)

    def as_dict(self) -> dict:
        return asdict(self)


# Form field → (the limit on it, how the message counts it).
FIELD_LIMITS = {
    "users": ("max_users", "{:g} users"),
    "arrival_rate": ("max_arrival_rate", "{:g} req/s"),
    "duration_s": ("max_duration_s", "{:g} s of measurement per arm"),
    "warmup_s": ("max_warmup_s", "{:g} s of warm-up per arm"),
    "rounds": ("max_rounds", "{:g} rounds"),
}


def planned_requests(config: dict) -> int:
    """The most requests the run may send, all arms (the TLS matrix's sub-arms too) and rounds,
    warm-up included."""
    names = config.get("arms") or []
    arms = len(names) + matrix.variant_count(config.get("tls_matrix") or [], names, config.get("tls_groups"))
    rounds = config.get("rounds") or 1
    per_arm_s = (config.get("warmup_s") or 0) + (config.get("duration_s") or 0)
    rate = config.get("arrival_rate") or (config.get("users") or 1) * _per_user_rps(config)
    planned = rate * per_arm_s * arms * rounds
    planned += saturation.planned_requests(_search(config), _per_user_rps(config))
    # 1e308 req/s (JSON allows it; the limit on the field is a message, not a stop) overflows to
    # infinity: count it as more than any budget rather than fail on int(inf).
    return int(planned) if math.isfinite(planned) else sys.maxsize


def _search(config: dict) -> dict | None:
    """The run's saturation search settings, defaults filled in; None without one (or when they are
    invalid: the form and the engine config refuse those)."""
    try:
        names = [a.get("name") if isinstance(a, dict) else a for a in config.get("arms") or []]
        return saturation.normalise(config.get("saturation"), names)
    except ValueError:
        return None


def _per_user_rps(config: dict) -> float:
    think_s = config.get("think_time_s") or 0
    return min(CLOSED_LOOP_RPS_PER_USER, 1 / think_s) if think_s else CLOSED_LOOP_RPS_PER_USER


def _saturation_problems(limits: Limits, sat: dict | None, project: str) -> list[tuple[str | None, str]]:
    """The search's maximum load against the users or arrival-rate limit, its stage against the
    measurement limit."""
    if not sat:
        return []
    name, unit = ("max_users", "{:g} users") if sat["mode"] == "users" else ("max_arrival_rate", "{:g} req/s")
    problems = []
    if sat["max"] > getattr(limits, name):
        problems.append(
            (
                "saturation_max",
                f"At most {unit.format(getattr(limits, name))} in project {project} (operator limit).",
            )
        )
    if sat["stage_s"] > limits.max_duration_s:
        message = f"At most {limits.max_duration_s:g} s per stage in project {project} (operator limit)."
        problems.append(("saturation_stage_s", message))
    return problems


def check(limits: Limits, config: dict, project: str) -> list[tuple[str | None, str]]:
    """(field, message) for every limit the config goes above; field None for the request budget."""
    problems: list[tuple[str | None, str]] = []
    for field, (name, unit) in FIELD_LIMITS.items():
        value, limit = config.get(field), getattr(limits, name)
        if value is not None and value > limit:
            problems.append((field, f"At most {unit.format(limit)} in project {project} (operator limit)."))
    problems += _saturation_problems(limits, _search(config), project)
    planned = planned_requests(config)
    generators = config.get("generators")
    if generators and generators > limits.max_generators:
        problems.append(
            (
                "generators",
                f"At most {limits.max_generators} generator processes per host in project {project} "
                "(operator limit).",
            )
        )
    # Above a field's limit the plan is moot: that field's message says what to change.
    if not problems and planned > limits.max_requests_per_run:
        loop = (
            "the arrival rate"
            if config.get("arrival_rate")
            else f"{CLOSED_LOOP_RPS_PER_USER:g} req/s per user"
        )
        problems.append(
            (
                None,
                f"This run may send up to {planned:,} requests ({loop} × (warm-up + duration) × arms × "
                f"rounds, plus every stage of a saturation search); project {project} allows at most "
                f"{limits.max_requests_per_run:,} per run "
                "(operator limit). Fewer users, a shorter duration, fewer arms or rounds, or a lower search "
                "maximum fit.",
            )
        )
    return problems


def check_counts(limits: Limits, active_runs: int, runs_last_day: int, project: str) -> list[str]:
    """Why the project cannot start one more run now: runs queued or running, runs of the last 24 h."""
    problems = []
    if active_runs >= limits.max_concurrent_runs:
        problems.append(
            f"Project {project} already has {active_runs} run(s) queued or running; at most "
            f"{limits.max_concurrent_runs} at a time (operator limit). Wait for one to end or cancel one."
        )
    if runs_last_day >= limits.max_runs_per_day:
        problems.append(
            f"Project {project} started {runs_last_day} run(s) in the last 24 hours; at most "
            f"{limits.max_runs_per_day} a day (operator limit)."
        )
    return problems


def summary(limits: Limits) -> str:
    """One line for the run form: what this project may ask for."""
    return (
        f"at most {limits.max_users:g} users, {limits.max_arrival_rate:g} req/s, "
        f"{limits.max_warmup_s:g} s warm-up and {limits.max_duration_s:g} s measured per arm, "
        f"{limits.max_rounds:g} rounds, {limits.max_requests_per_run:,} requests per run, "
        f"{limits.max_concurrent_runs} run(s) at a time, {limits.max_runs_per_day} a day, "
        f"{limits.max_generators} generator processes per host"
    )
