"""Drive one Locust swarm per arm and report each arm as soon as it ends.

Imported only inside the engine subprocess, after Locust (and so gevent's monkey-patching).
"""

from __future__ import annotations

import os
import platform
import random
import socket
import ssl
import sys
import time
from typing import IO

import gevent
import locust
from locust import User, constant, task
from locust.env import Environment
from locust.event import Events

from workers.engine.client import ARM_POLICIES, Endpoint, TimedClient, make_ssl_context, split_target
from workers.engine.protocol import EXIT_ARM_ERROR, EXIT_OK, ArmSpec, EngineConfig, emit
from workers.engine.recorder import ArmRecorder, CpuMeter

TICK_S = 1.0


def engine_facts() -> dict:
    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "locust": locust.__version__,
        "gevent": gevent.__version__,
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "pid": os.getpid(),
    }


class Cancelled(Exception):
    pass


class Swarm:
    def __init__(self, config: EngineConfig, out: IO[str]) -> None:
        self.config = config
        self.out = out
        self.cancelled = False
        self.elapsed_before_arm = 0.0

    def cancel(self) -> None:
        self.cancelled = True

    def _expected(self, status: int) -> bool:
        expected = self.config.expected_status
        return status in expected if expected else 200 <= status < 300

    def preflight(self, arm: ArmSpec) -> tuple[Endpoint, ssl.SSLContext | None]:
        """Resolve the host and make one request, so an unreachable arm fails loudly, not as noise."""
        endpoint = Endpoint.resolve(arm.url)
        context = make_ssl_context(self.config.verify_tls) if endpoint.tls else None
        _, policy = ARM_POLICIES[arm.name]
        client = TimedClient(endpoint, policy, context, timeout_s=self.config.timeout_s)
        sample = client.request(arm.url, split_target(arm.url))
        client.close()
        if sample.error:
            raise ConnectionError(f"{sample.error}: {sample.error_detail}")
        return endpoint, context

    def run(self) -> int:
        for index, arm in enumerate(self.config.arms):
            if self.cancelled:
                break
            try:
                endpoint, context = self.preflight(arm)
            except Exception as exc:  # noqa: BLE001 - reported to the task, which fails the run
                emit(self.out, "arm_error", arm=arm.name, error=f"preflight of {arm.url} failed: {exc}")
                return EXIT_ARM_ERROR
            result = self.run_arm(index, arm, endpoint, context)
            emit(self.out, "arm", arm=arm.name, url=arm.url, result=result)
            self.elapsed_before_arm += self.config.warmup_s + self.config.duration_s
        emit(self.out, "done", status="cancelled" if self.cancelled else "succeeded")
        return EXIT_OK

    def _user_class(self, arm: ArmSpec, endpoint: Endpoint, context, recorder: ArmRecorder) -> type[User]:
        _, policy = ARM_POLICIES[arm.name]
        urls = [(arm.url, split_target(arm.url))]
        timeout_s = self.config.timeout_s
        expected = self._expected

        class ArmUser(User):
            wait_time = constant(0)

            def on_start(self) -> None:
                self.timed = TimedClient(endpoint, policy, context, timeout_s=timeout_s)

            def on_stop(self) -> None:
                self.timed.close()

            @task
            def one_request(self) -> None:
                url, target = urls[0] if len(urls) == 1 else random.choice(urls)  # noqa: S311
                sample = self.timed.request(url, target)
                recorder.record(sample, sample.status is not None and expected(sample.status))

        ArmUser.__name__ = f"ArmUser_{arm.name}"
        return ArmUser

    def run_arm(self, index: int, arm: ArmSpec, endpoint: Endpoint, context) -> dict:
        cfg = self.config
        recorder = ArmRecorder(arm.name)
        env = Environment(user_classes=[self._user_class(arm, endpoint, context, recorder)], events=Events())
        runner = env.create_local_runner()
        cpu = CpuMeter()
        started_at = time.time()
        runner.start(cfg.users, spawn_rate=cfg.spawn_rate)
        series: list[dict] = []
        arm_t0 = time.monotonic()
        try:
            self._warm_up(index, arm, runner, recorder, arm_t0)
            cpu.percent()
            recorder.start_window()
            window_t0 = time.monotonic()
            second = 0
            while not self.cancelled:
                second += 1
                target = window_t0 + second * TICK_S
                if second * TICK_S > cfg.duration_s:
                    break
                gevent.sleep(max(0.0, target - time.monotonic()))
                # How late the loop woke up: a saturated generator shows lag here.
                lag_ms = max(0.0, (time.monotonic() - target) * 1000)
                point = recorder.roll_second()
                point.update(
                    t_s=second,
                    users=runner.user_count,
                    gen_cpu_pct=cpu.percent(),
                    loop_lag_ms=round(lag_ms, 3),
                )
                series.append(point)
                self._progress(index, arm, "measure", time.monotonic() - arm_t0, point["requests"], runner)
            # A fractional last second (duration not a whole number of seconds).
            remaining = cfg.duration_s - (time.monotonic() - window_t0)
            if remaining > 0 and not self.cancelled:
                gevent.sleep(remaining)
        finally:
            recorder.close_window()
            runner.quit()
        result = recorder.result()
        result.update(
            started_at=started_at,
            finished_at=time.time(),
            users=cfg.users,
            warmup_s=cfg.warmup_s,
            warmup_requests=recorder.warmup_requests,
            complete=not self.cancelled,
            series=series,
            address=endpoint.address,
        )
        return result

    def _warm_up(self, index: int, arm: ArmSpec, runner, recorder: ArmRecorder, arm_t0: float) -> None:
        deadline = arm_t0 + self.config.warmup_s
        last = recorder.warmup_requests
        while not self.cancelled and time.monotonic() < deadline:
            gevent.sleep(min(TICK_S, max(0.0, deadline - time.monotonic())))
            done = recorder.warmup_requests
            self._progress(index, arm, "warmup", time.monotonic() - arm_t0, done - last, runner)
            last = done

    def _progress(self, index: int, arm: ArmSpec, phase: str, arm_elapsed: float, rps: float, runner) -> None:
        emit(
            self.out,
            "progress",
            arm=arm.name,
            arm_index=index,
            arms_total=len(self.config.arms),
            phase=phase,
            elapsed_s=round(self.elapsed_before_arm + arm_elapsed, 3),
            planned_s=self.config.planned_s(),
            rps=rps,
            users=runner.user_count,
        )


def main(config_text: str, out: IO[str]) -> int:
    import json
    import signal

    config = EngineConfig.from_dict(json.loads(config_text))
    swarm = Swarm(config, out)
    # Cancel (SIGTERM from the task) ends the current arm early and keeps what it measured.
    gevent.signal_handler(signal.SIGTERM, swarm.cancel)
    gevent.signal_handler(signal.SIGINT, swarm.cancel)
    emit(out, "hello", engine=engine_facts())
    code = swarm.run()
    print(f"tollgate engine finished with exit code {code}", file=sys.stderr)
    return code
