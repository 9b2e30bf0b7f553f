"""Drive one Locust swarm per arm and report each arm as soon as it ends. Imported only inside the
engine subprocess, after Locust (and so gevent's monkey-patching)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
import sys
import time
from dataclasses import dataclass
from typing import IO

import gevent
from gevent.event import Event
from locust import User
from locust.env import Environment
from locust.event import Events

from portal.lib.runs.protocol import EXIT_ARM_ERROR, EXIT_OK, ArmSpec, EngineConfig, emit
from portal.lib.tls.matrix import MATRIX_ARMS, base_arm
from workers.engine import saturation
from workers.engine.distribution.arm import DistributedArm, Fleet
from workers.engine.hello import engine_facts
from workers.engine.http.by_protocol import client_factory
from workers.engine.http.endpoint import ARM_POLICIES
from workers.engine.matrix import quic as quic_matrix
from workers.engine.matrix.variants import expand
from workers.engine.preflight import ArmRefused, PreflightFailed, Prepared, preflight, servers_seen, tls_facts
from workers.engine.recording.cpu import CpuMeter
from workers.engine.recording.quic import tally_for
from workers.engine.recording.recorder import ArmRecorder
from workers.engine.unreachable import TargetUnreachable, Watch
from workers.engine.users import arm_user_class

TICK_S = 1.0


class Cancelled(BaseException):  # noqa: N818 - like GreenletExit: not an error, nothing catches it
    """Thrown into the engine's main greenlet by a cancel during a step that may block for seconds."""


@dataclass(frozen=True)
class Load:
    """The load one arm (or one stage of a saturation search) runs at: users, open-loop arrival rate
    (None: closed loop), warm-up and measured window. ``Load.of(config)`` is the run's own."""

    users: int
    spawn_rate: float
    arrival_rate: float | None
    warmup_s: float
    duration_s: float

    @classmethod
    def of(cls, config: EngineConfig) -> Load:
        return cls(config.users, config.spawn_rate, config.arrival_rate, config.warmup_s, config.duration_s)


class Swarm:
    def __init__(self, config: EngineConfig, out: IO[str]) -> None:
        self.config = config
        self.out = out
        self.cancelled = False
        self.stopped: str | None = None  # why the current arm was stopped early (target unreachable)
        self._blocking = None  # the greenlet in a step a cancel interrupts (``interruptible``)
        self._woken = Event()  # set by a cancel: the arm loops' pauses end at once
        self.elapsed_before_arm = 0.0
        self.tls_facts_sent = False
        self.headers = dict(config.headers)
        # Connection policy per arm name; the TLS matrix adds its sub-arms' (workers.engine.matrix.variants).
        self.policies = {name: policy for name, (_, policy) in ARM_POLICIES.items()}
        self.arms_total = config.arm_count() * config.rounds
        self.quic_found: dict = {}  # the HTTP/3 arms' QUIC servers by endpoint (workers.engine.discovery)

    def headers_for(self, arm: ArmSpec) -> dict[str, str]:
        """The configured headers (credentials included) travel over TLS; over plain HTTP only when
        the config says the user allowed it."""
        if ARM_POLICIES[base_arm(arm.name)][0] == "https" or self.config.headers_over_http:
            return self.headers
        return {}

    def cancel(self) -> None:
        self.cancelled = True
        self._woken.set()
        blocked = self._blocking
        if blocked is not None:

            def interrupt() -> None:
                if self._blocking is blocked:  # still inside that step
                    blocked.throw(Cancelled())

            gevent.get_hub().loop.run_callback(interrupt)

    @contextlib.contextmanager
    def interruptible(self):
        """A step that may wait for seconds on the target (a preflight against a slow server, TLS facts,
        the matrix's probing handshakes): a cancel ends it at once (``Cancelled``), not after its
        timeouts. The arm loops check ``cancelled`` every second instead."""
        self._blocking = gevent.getcurrent()
        try:
            yield
        finally:
            self._blocking = None

    def halted(self) -> bool:
        return self.cancelled or self.stopped is not None

    def pause(self, seconds: float) -> None:
        """Sleep until the next tick, or until a cancel."""
        self._woken.wait(seconds)

    def _expected(self, status: int) -> bool:
        expected = self.config.expected_status
        return status in expected if expected else 200 <= status < 300

    def preflight(self, arm: ArmSpec) -> Prepared:
        return preflight(self.config, arm, self.headers_for(arm), self.quic_found)

    def _tls_facts(self, arm: ArmSpec, prepared: Prepared) -> None:
        emit(self.out, "tls_info", arm=arm.name, url=arm.url, info=tls_facts(self.config, prepared))

    def run(self) -> int:
        cfg = self.config
        prepared: dict[str, Prepared] = {}
        order = list(cfg.arms)  # the TLS matrix's sub-arms join it after their arm (``_prepare_all``)
        self.arms_total = cfg.arm_count() * cfg.rounds + cfg.stage_count()
        try:
            with self.interruptible():
                failed = self._prepare_all(prepared, order)
        except Cancelled:
            failed = None
        if failed and not self.cancelled:  # before the first measured second: nothing was measured
            arm, error = failed
            emit(self.out, "arm_error", arm=arm.name, error=error, preflight=True, url=arm.url)
            return EXIT_ARM_ERROR
        position = 0
        for round_index in range(cfg.rounds):
            # Interleaved order: A B C A B C …, so slow drift of the target hits every arm alike.
            for arm in order:
                if self.cancelled:
                    break
                ready = prepared[arm.name]
                if f"{arm.name}#{round_index}" in cfg.skip:  # measured by an earlier attempt
                    self.elapsed_before_arm += cfg.warmup_s + cfg.duration_s
                    position += 1
                    continue
                result = self.run_arm(position, arm, ready)
                emit(
                    self.out,
                    "arm",
                    arm=arm.name,
                    round=round_index,
                    url=ready.origin + ready.targets[0]["path"],
                    requested_url=arm.url,
                    targets=ready.targets,
                    redirects=ready.redirects,
                    result=result,
                )
                if result["stopped"]:  # the arm's figures are sent; the run ends with the reason
                    emit(self.out, "arm_error", arm=arm.name, error=result["stopped"])
                    return EXIT_ARM_ERROR
                self.elapsed_before_arm += cfg.warmup_s + cfg.duration_s
                position += 1
        if cfg.saturation and not self.cancelled:  # after the arms (workers/engine/saturation.py)
            try:
                saturation.search_all(self, prepared, position, Load)
            except TargetUnreachable as stop:
                emit(self.out, "arm_error", arm=stop.arm, error=stop.reason)
                return EXIT_ARM_ERROR
        emit(self.out, "done", status="cancelled" if self.cancelled else "succeeded")
        return EXIT_OK

    def _prepare_all(self, prepared: dict[str, Prepared], order: list[ArmSpec]) -> tuple[ArmSpec, str] | None:
        """Every arm's preflight before any arm is measured (a certificate that does not verify, a
        404 or a closed port on the last arm stops the run before the first spends its window), then
        the Server headers seen, the TLS facts of the first TLS arm and the matrix's sub-arms
        (inserted in ``order`` after their arm). The arm that failed and why, or None."""
        for arm in list(order):
            if self.cancelled:
                return None
            try:
                prepared[arm.name] = self.preflight(arm)
            except ArmRefused as exc:  # not the server's protocol (HTTP/2): the other arms are measured
                emit(self.out, "refused", arm=arm.name, url=exc.url, reason=str(exc))
                order.remove(arm)
                self.arms_total -= self.config.rounds
                if not order:
                    return arm, f"preflight of {exc.url} failed: {exc}"
                continue
            except PreflightFailed as exc:
                return arm, f"preflight of {exc.url} failed: {exc}"
            except Exception as exc:  # noqa: BLE001 - reported to the task, which fails the run
                return arm, f"preflight of {arm.url} failed: {exc}"
        emit(self.out, "server_software", **servers_seen(prepared, order))
        for arm in list(order):
            if self.cancelled:
                return None
            if prepared[arm.name].endpoint.tls and not self.tls_facts_sent:
                self.tls_facts_sent = True
                self._tls_facts(arm, prepared[arm.name])
            if self.config.tls_matrix and arm.name in MATRIX_ARMS:
                index = order.index(arm)
                order[index + 1 : index + 1] = self._expand(arm, prepared)
        return None

    def _expand(self, arm: ArmSpec, prepared: dict[str, Prepared]) -> list[ArmSpec]:
        """Probe the TLS matrix's variants of ``arm`` (one handshake each, before any window) and
        report them; the accepted ones become sub-arms with their own context and policy."""
        cfg = self.config
        ready = prepared[arm.name]
        if ready.quic is not None:  # h3_new: its group variants over QUIC
            return self._expand_quic(arm, ready, prepared)
        options = {"library": cfg.tls_library, "client_certs": cfg.client_certs, "groups": cfg.tls_groups}
        sub_arms, entries = expand(
            arm, ready.endpoint, cfg.tls_matrix, cfg.verify_tls, cfg.timeout_s, **options
        )
        if not entries:
            return []
        emit(self.out, "matrix", arm=arm.name, variants=entries)
        for sub in sub_arms:
            prepared[sub.spec.name] = dataclasses.replace(ready, context=sub.context)
            self.policies[sub.spec.name] = sub.policy
        self.arms_total -= (len(entries) - len(sub_arms)) * cfg.rounds  # refused: not run
        return [sub.spec for sub in sub_arms]

    def _expand_quic(self, arm: ArmSpec, ready: Prepared, prepared: dict[str, Prepared]) -> list[ArmSpec]:
        """``_expand`` for ``h3_new`` (``workers.engine.matrix.quic``): one QUIC handshake per group."""
        cfg = self.config
        path = ready.targets[0]["path"]
        subs, entries = quic_matrix.expand(
            arm,
            ready.endpoint,
            ready.quic,
            path,
            cfg.tls_matrix,
            cfg.verify_tls,
            cfg.timeout_s,
            cfg.tls_groups,
        )
        if not entries:
            return []
        emit(self.out, "matrix", arm=arm.name, variants=entries)
        for spec, settings, policy in subs:
            prepared[spec.name] = dataclasses.replace(ready, context=settings)
            self.policies[spec.name] = policy
        self.arms_total -= (len(entries) - len(subs)) * cfg.rounds
        return [spec for spec, _, _ in subs]

    def _user_class(self, arm: ArmSpec, ready: Prepared, recorder: ArmRecorder, load: Load) -> type[User]:
        policy = self.policies[arm.name]
        paths = [target["path"] for target in ready.targets]
        cum_weights = list(itertools.accumulate(target["weight"] for target in ready.targets))
        cfg = self.config
        timeout_s = cfg.timeout_s
        headers = self.headers_for(arm)
        expected = self._expected
        endpoint, context = ready.endpoint, ready.context
        # Open loop: each user sends on its own fixed schedule, rate / users per second.
        interval_ns = int(1e9 * load.users / load.arrival_rate) if load.arrival_rate else 0

        def pick() -> str:
            if len(paths) == 1:
                return paths[0]
            return random.choices(paths, cum_weights=cum_weights)[0]  # noqa: S311 - load mix, not crypto

        new_client, lanes = client_factory(
            endpoint, policy, context, timeout_s, headers, cfg.h2_streams, recorder.quic
        )
        return arm_user_class(
            arm.name, new_client, pick, recorder, expected, interval_ns, cfg.think_time_s, lanes
        )

    def run_arm(
        self, index: int, arm: ArmSpec, ready: Prepared, load: Load | None = None, watch: Watch | None = None
    ) -> dict:
        """One arm at ``load`` (default: the run's): warm-up, measured window, the arm's result.
        ``watch``: the unreachable-target rule's seconds so far (a saturation search's earlier stages)."""
        load = load or Load.of(self.config)
        self.stopped = None
        watch = watch or Watch()
        watch.restart()
        if (
            self.config.generators != 1
        ):  # a Locust master and its workers (workers.engine.distribution.master)
            return DistributedArm(Fleet.of(self), index, arm, ready, load, watch).run()
        recorder = ArmRecorder(arm.name, tally_for(ready.quic))
        user_class = self._user_class(arm, ready, recorder, load)
        env = Environment(user_classes=[user_class], events=Events())
        runner = env.create_local_runner()
        cpu = CpuMeter()
        started_at = time.time()
        runner.start(load.users, spawn_rate=load.spawn_rate)
        series: list[dict] = []
        arm_t0 = time.monotonic()
        window_started_at: float | None = None  # wall clock, for server-side samplers
        try:
            self._warm_up(index, arm, runner, recorder, arm_t0, load, watch)
            window_started_at = self._measure(index, arm, runner, recorder, cpu, arm_t0, series, load, watch)
        finally:
            recorder.close_window()
            window_ended_at = time.time()
            runner.quit()
        result = self._arm_result(
            recorder, ready, series, started_at, window_started_at, window_ended_at, load
        )
        # How the requests were made: by the arm's single loop (http/single_loop.py) or each user's own.
        loop = user_class.single_loop
        result["single_loop"] = {"requests": loop.requests, "handed_back": loop.handed_back} if loop else None
        return result

    def _measure(
        self,
        index: int,
        arm: ArmSpec,
        runner,
        recorder: ArmRecorder,
        cpu: CpuMeter,
        arm_t0: float,
        series: list[dict],
        load: Load,
        watch: Watch,
    ) -> float:
        """The measurement window, right after the warm-up: one point per second appended to
        ``series``, until the duration is over or the run is cancelled. Returns the window's start
        (wall clock)."""
        cpu.sample()
        recorder.start_window()
        window_t0 = time.monotonic()
        window_started_at = time.time()
        second = 0
        while not self.halted():
            second += 1
            target = window_t0 + second * TICK_S
            if second * TICK_S > load.duration_s:
                break
            self.pause(max(0.0, target - time.monotonic()))
            if self.cancelled:
                break  # a second cut short is in the totals, not in the series
            # How late the loop woke up: a saturated generator shows lag here.
            lag_ms = max(0.0, (time.monotonic() - target) * 1000)
            point = recorder.roll_second()
            cpu_pct, runq_pct = cpu.sample()
            point.update(
                t_s=second,
                users=runner.user_count,
                gen_cpu_pct=cpu_pct,
                gen_runq_pct=runq_pct,
                loop_lag_ms=round(lag_ms, 3),
            )
            series.append(point)
            self._progress(index, arm, "measure", time.monotonic() - arm_t0, point["requests"], runner, point)
            self.stopped = watch.tick_recorder(recorder)
        # A fractional last second (duration not a whole number of seconds).
        remaining = load.duration_s - (time.monotonic() - window_t0)
        if remaining > 0 and not self.halted():
            self.pause(remaining)
        return window_started_at

    def _arm_result(
        self,
        recorder: ArmRecorder,
        ready: Prepared,
        series: list[dict],
        started_at: float,
        window_started_at: float | None,
        window_ended_at: float,
        load: Load,
    ) -> dict:
        """The arm's ``result`` for the ``arm`` event: the recorder's figures and how they were taken."""
        cfg = self.config
        result = recorder.result()
        result.update(
            started_at=started_at,
            finished_at=time.time(),
            users=load.users,
            warmup_s=load.warmup_s,
            warmup_requests=recorder.warmup_requests,
            complete=not self.halted(),
            stopped=self.stopped,
            series=series,
            address=ready.endpoint.address,
            window_started_at=window_started_at,
            window_ended_at=window_ended_at,
            arrival_rate=load.arrival_rate,
            think_time_s=cfg.think_time_s,
        )
        return result

    def _warm_up(
        self, index: int, arm: ArmSpec, runner, recorder: ArmRecorder, arm_t0: float, load: Load, watch: Watch
    ) -> None:
        deadline = arm_t0 + load.warmup_s
        last = recorder.warmup_requests
        while not self.halted() and time.monotonic() < deadline:
            self.pause(min(TICK_S, max(0.0, deadline - time.monotonic())))
            done = recorder.warmup_requests
            self._progress(index, arm, "warmup", time.monotonic() - arm_t0, done - last, runner)
            last = done
            self.stopped = watch.tick_recorder(recorder)

    def _progress(
        self, index: int, arm: ArmSpec, phase: str, arm_elapsed: float, rps: float, runner, point=None
    ) -> None:
        # The measured second just closed, for the live charts (the same figures as ``series``).
        second = {key: point[key] for key in ("t_s", "requests", "p50_us", "p95_us")} if point else None
        emit(
            self.out,
            "progress",
            arm=arm.name,
            arm_index=index,
            arms_total=self.arms_total,
            phase=phase,
            elapsed_s=round(self.elapsed_before_arm + arm_elapsed, 3),
            planned_s=self.config.planned_s(),
            rps=rps,
            users=runner.user_count,
            second=second,
        )


def main(config_text: str, out: IO[str], terminated=lambda: False) -> int:
    """``terminated()``: whether a SIGTERM came before this (``workers.engine.__main__``)."""
    import json
    import signal

    config = EngineConfig.from_dict(json.loads(config_text))
    swarm = Swarm(config, out)
    # Cancel (SIGTERM from the task) ends the current arm early and keeps what it measured.
    gevent.signal_handler(signal.SIGTERM, swarm.cancel)
    gevent.signal_handler(signal.SIGINT, swarm.cancel)
    if terminated():
        swarm.cancel()
    emit(out, "hello", engine=engine_facts(config.tls_library))
    try:
        code = swarm.run()
    finally:
        Fleet.close_of(swarm)
    print(f"tollgate engine finished with exit code {code}", file=sys.stderr)
    return code
