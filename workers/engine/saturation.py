"""The saturation search in the engine: step one arm's load in stages until its knee (issue 15).

Runs after the run's own arms and rounds (``Swarm.run``), so the report's comparisons are those of a
normal run and the search adds the capacity curve. Each stage is ``Swarm.run_arm`` at a ``Load`` of its
own (users, or arrival rate in open loop); its point (``portal.lib.stats.capacity.stage_point``) is sent as
a ``capacity`` message; ``portal.lib.stats.saturation.next_load`` chooses the next stage from the verdicts
so far: coarse steps (× factor) until a stage is bad, then bisection between the last good and the
first bad load. A saturated generator ends the arm's search (nothing more is learnt of the server).
"""

from __future__ import annotations

from collections.abc import Callable

from portal.lib.runs.protocol import ArmSpec, emit
from portal.lib.stats import capacity, saturation
from portal.lib.tls.matrix import SEPARATOR
from workers.engine.unreachable import TargetUnreachable, Watch

# The stages run under their own name (progress and the live page show "plain@capacity", not more
# seconds of the arm "plain"); their results are sent as ``capacity`` messages, never as arms.
STAGE_SUFFIX = SEPARATOR + "capacity"


def search_all(swarm, prepared: dict, position: int, make_load: Callable) -> int:
    """Search every arm the settings name (each was preflighted by the run's arms), ``swarm`` a
    ``workers.engine.swarm.Swarm``, ``make_load`` its ``Load`` (passed in: swarm imports this module).
    Returns the next arm index for progress messages."""
    sat = swarm.config.saturation
    by_name = {arm.name: arm for arm in swarm.config.arms}
    for name in sat["arms"]:
        if swarm.cancelled:
            break
        position = search_arm(swarm, by_name[name], prepared[name], position, make_load)
    return position


def search_arm(swarm, arm, ready, position: int, make_load: Callable) -> int:
    cfg = swarm.config
    sat = cfg.saturation
    stage_arm = ArmSpec(arm.name + STAGE_SUFFIX, arm.url)
    swarm.policies[stage_arm.name] = swarm.policies[arm.name]
    points: list[dict] = []
    watch = Watch()  # the unreachable-target rule spans the arm's stages
    step: tuple[float, str] | None = (saturation.coarse_loads(sat)[0], "coarse")
    while step is not None and not swarm.cancelled:
        load_value, phase = step
        users = saturation.stage_users(sat, load_value, cfg.users)
        rate = load_value if sat["mode"] == "rate" else None
        # All users at once: the stage's warm-up is the ramp (Locust spawns them in one go).
        load = make_load(users, float(max(users, 1) * 10), rate, sat["warmup_s"], sat["stage_s"])
        result = swarm.run_arm(position, stage_arm, ready, load=load, watch=watch)
        point = capacity.stage_point(result, load_value, phase, sat["mode"])
        points.append(point)
        emit(swarm.out, "capacity", arm=arm.name, stage=len(points) - 1, point=point)
        if result["stopped"]:
            raise TargetUnreachable(stage_arm.name, result["stopped"])
        swarm.elapsed_before_arm += sat["warmup_s"] + sat["stage_s"]
        position += 1
        step = saturation.next_load(sat, points, capacity.verdicts(points, sat["mode"]))
    return position
