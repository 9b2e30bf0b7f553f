"""One arm of a distributed run, driven by the Locust master (``workers.engine.distribution.master.Fleet``).

Same result shape as ``Swarm.run_arm`` on one process, plus ``generators``: each Locust worker's share
(requests, failures, generator CPU, its histograms, and when it was lost). The merged figures are the
exact sum of the workers' (``portal.lib.stats.generators.merge_results``).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter

import gevent

from portal.lib.stats import generators as merging
from workers.engine.distribution.master import READY_TIMEOUT_S, RESULT_TIMEOUT_S, SECOND_WAIT_S, TICK_S, Fleet


class DistributedArm:
    def __init__(self, fleet: Fleet, index: int, arm, ready, load, watch) -> None:
        self.fleet = fleet
        self.swarm = fleet.swarm
        self.index, self.arm, self.ready, self.load = index, arm, ready, load
        self.watch = watch  # the unreachable-target rule (workers.engine.unreachable.Watch)
        self.seen: dict[str, tuple[int, dict[str, int]]] = {}  # the counts already fed to it
        self.series: list[dict] = []
        self.participants: list[str] = []

    def payload(self) -> dict:
        ready = self.ready
        return {
            "config": dataclasses.asdict(self.swarm.config),
            "arm": dataclasses.asdict(self.arm),
            "endpoint": dataclasses.asdict(ready.endpoint),
            "targets": ready.targets,
            "origin": ready.origin,
            "quic": ready.quic,  # an HTTP/3 arm's QUIC server (port, discovered_by, alt_svc)
            "load": dataclasses.asdict(self.load),
            # The master's policy for this name: a saturation stage (``plain@capacity``) is not among
            # the workers' stock arm names.
            "policy": dataclasses.asdict(self.swarm.policies[self.arm.name]),
        }

    def prepare(self) -> None:
        """Send the arm to every live worker; the ones that built it take part."""
        fleet = self.fleet
        fleet.arm_index = self.index
        fleet.ready, fleet.seconds, fleet.results, fleet.counts = set(), {}, {}, {}
        fleet.check_lost()
        gids = fleet.live()
        fleet.send("tg_arm", self.payload(), gids)
        fleet.wait_for(lambda gid: gid in fleet.ready, gids, READY_TIMEOUT_S)
        for gid in fleet.live(gids):
            if gid not in fleet.ready:
                fleet.lose(gid, f"did not build the arm within {READY_TIMEOUT_S:.0f} s")
        self.participants = [gid for gid in gids if gid in fleet.ready]
        if not self.participants:
            fleet.fail(self.arm.name, "no generator process is left to run the arm (all were lost)")

    def run(self) -> dict:
        self.prepare()
        fleet, load = self.fleet, self.load
        started_at = time.time()
        arm_t0 = time.monotonic()
        spawner = gevent.spawn(fleet.runner.start, load.users, spawn_rate=load.spawn_rate)
        window_started_at = None
        window_t0 = time.monotonic()
        try:
            self.warm_up(arm_t0)
            fleet.send("tg_window", {}, fleet.live(self.participants))
            window_started_at, window_t0 = time.time(), time.monotonic()
            self.measure(arm_t0, window_t0)
        finally:
            live = fleet.live(self.participants)
            fleet.send("tg_end", {}, live)
            window_ended_at = time.time()
            measured_s = time.monotonic() - window_t0 if window_started_at else 0.0
            fleet.wait_for(lambda gid: gid in fleet.results, live, RESULT_TIMEOUT_S)
            for gid in fleet.live(live):
                if gid not in fleet.results:
                    fleet.lose(gid, f"sent no result within {RESULT_TIMEOUT_S:.0f} s")
            spawner.kill()
            if not self.swarm.halted():
                # Locust's stop polls its workers once a second; a cancelled or stopped run ends with
                # the fleet's quit (Fleet.close), which stops the users at once.
                fleet.runner.stop()
        result = self.merged(measured_s)
        result.update(
            started_at=started_at,
            finished_at=time.time(),
            window_started_at=window_started_at,
            window_ended_at=window_ended_at,
        )
        return result

    def warm_up(self, arm_t0: float) -> None:
        deadline = arm_t0 + self.load.warmup_s
        while not self.swarm.halted() and time.monotonic() < deadline:
            self.fleet.send("tg_poll", {}, self.fleet.live(self.participants))
            self.swarm.pause(min(TICK_S, max(0.0, deadline - time.monotonic())))
            self.fleet.check_lost()
            self.swarm._progress(
                self.index, self.arm, "warmup", time.monotonic() - arm_t0, 0, self.fleet.runner
            )
            self.swarm.stopped = self.watch.tick(*self.counts_delta())

    def counts_delta(self) -> tuple[int, dict[str, int]]:
        """Attempts and connection failures by kind since the last call, summed over the workers
        (each reports its running totals with ``tg_second`` and ``tg_counts``)."""
        attempts, failures = 0, Counter()
        for gid, (total, kinds) in list(self.fleet.counts.items()):
            seen_total, seen_kinds = self.seen.get(gid, (0, {}))
            attempts += max(0, total - seen_total)
            for kind, count in kinds.items():
                failures[kind] += max(0, count - seen_kinds.get(kind, 0))
            self.seen[gid] = (total, kinds)
        return attempts, dict(failures)

    def measure(self, arm_t0: float, window_t0: float) -> None:
        """One merged point per second: each worker's bucket of that second, added."""
        fleet = self.fleet
        second = 0
        while not self.swarm.halted():
            second += 1
            target = window_t0 + second * TICK_S
            if second * TICK_S > self.load.duration_s:
                break
            self.swarm.pause(max(0.0, target - time.monotonic()))
            if self.swarm.cancelled:
                break  # a second cut short is in the totals, not in the series
            lag_ms = max(0.0, (time.monotonic() - target) * 1000)
            live = fleet.live(self.participants)
            fleet.send("tg_tick", {"t_s": second}, live)

            def reported(gid: str, second=second) -> bool:
                return any(s["t_s"] == second for s in fleet.seconds.get(gid, []))

            fleet.wait_for(reported, live, SECOND_WAIT_S)
            buckets = [s for gid in live for s in fleet.seconds.get(gid, []) if s["t_s"] == second]
            point = merging.merge_second(buckets)
            point.update(
                t_s=second,
                users=fleet.runner.user_count,
                gen_cpu_pct=max((b.get("cpu_pct") or 0.0 for b in buckets), default=None),
                gen_runq_pct=max(
                    (b["runq_pct"] for b in buckets if b.get("runq_pct") is not None), default=None
                ),
                loop_lag_ms=round(lag_ms, 3),
                generators=len(buckets),
            )
            self.series.append(point)
            self.swarm._progress(
                self.index,
                self.arm,
                "measure",
                time.monotonic() - arm_t0,
                point["requests"],
                fleet.runner,
                point,
            )
            self.swarm.stopped = self.watch.tick(*self.counts_delta())
        remaining = self.load.duration_s - (time.monotonic() - window_t0)
        if remaining > 0 and not self.swarm.halted():
            self.swarm.pause(remaining)

    def share(self, gid: str) -> tuple[dict | None, float | None]:
        """A worker's part of the arm and its CPU seconds: its result, or for a worker lost mid-arm
        the seconds it reported (CPU estimated from their per-second CPU %)."""
        fleet = self.fleet
        if gid in fleet.results:
            return fleet.results[gid]["result"], fleet.results[gid]["cpu_s"]
        if gid in self.participants:
            seconds = fleet.seconds.get(gid, [])
            cpu_s = sum((s.get("cpu_pct") or 0.0) for s in seconds) / 100 * TICK_S
            return merging.seconds_total(seconds), round(cpu_s, 6)
        return None, None

    def merged(self, measured_s: float) -> dict:
        cfg, load, fleet = self.swarm.config, self.load, self.fleet
        parts, shares = [], []
        for gid, worker in fleet.workers.items():
            part, cpu_s = self.share(gid)
            if part is not None:
                parts.append(part)
            shares.append(
                {
                    "id": gid,
                    "host": worker.get("host"),
                    "requests": (part or {}).get("requests", 0),
                    "failures": (part or {}).get("failures", 0),
                    "warmup_requests": (part or {}).get("warmup_requests", 0),
                    "cpu_s": cpu_s,
                    "lost_at": worker.get("lost_at"),
                    "lost_reason": worker.get("lost_reason"),
                    "hist": (part or {}).get("hist") or {},
                }
            )
        result = merging.merge_results(parts, measured_s)
        lost = [share["id"] for share in shares if share["lost_at"] is not None]
        result.update(
            users=load.users,
            warmup_s=load.warmup_s,
            warmup_requests=sum(share["warmup_requests"] for share in shares),
            complete=not self.swarm.halted() and not lost,
            stopped=self.swarm.stopped,
            lost_generators=lost,
            series=self.series,
            address=self.ready.endpoint.address,
            arrival_rate=load.arrival_rate,
            think_time_s=cfg.think_time_s,
            generators=shares,
        )
        return result
