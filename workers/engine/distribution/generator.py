"""One Locust worker process of a distributed run (a generator process):
``python -m workers.engine.distribution.generator HOST PORT``.

It connects to the run's Locust master (``master.Fleet``), builds each arm's user class from the arm
the master sends (under the fixed name ``ArmUser``, so Locust's dispatcher can place users), keeps
its own ArmRecorder, and answers the master's window, tick and end messages with its
per-second buckets and its full recorder result. Documented in docs/engine-protocol.md.
"""

import locust  # noqa: F401, I001 - must come first: it monkey-patches with gevent

import argparse
import io
import os
import signal
import socket
import sys

import gevent
from locust.env import Environment
from locust.event import Events

from portal.lib.runs.protocol import ArmSpec, EngineConfig
from workers.engine.distribution.master import USER_CLASS, ArmUser
from workers.engine.http.endpoint import ConnectionPolicy, Endpoint
from workers.engine.discovery import quic_settings
from workers.engine.preflight import Prepared
from workers.engine.recording.cpu import CpuMeter, process_cpu_s
from workers.engine.recording.quic import tally_for
from workers.engine.recording.recorder import ArmRecorder
from workers.engine.swarm import Load, Swarm
from workers.engine.tls.libraries import run_context


class Generator:
    """The custom messages of one Locust worker. Each handler is quick and their order matters (the
    window opens before its ticks, the last tick comes before the end), so none runs concurrently."""

    def __init__(self, runner, gid: str) -> None:
        self.runner = runner
        self.gid = gid
        self.recorder: ArmRecorder | None = None
        self.arm_index = -1
        self.cpu = CpuMeter()
        self.cpu_at_window = 0.0
        for name, handler in (
            ("tg_arm", self.on_arm),
            ("tg_window", self.on_window),
            ("tg_tick", self.on_tick),
            ("tg_poll", self.on_poll),
            ("tg_end", self.on_end),
        ):
            runner.register_message(name, handler)

    def send(self, kind: str, **data) -> None:
        self.runner.send_message(kind, {"gid": self.gid, "index": self.arm_index, **data})

    def on_arm(self, environment, msg, **_kw) -> None:
        data = msg.data
        config = EngineConfig.from_dict(data["config"])
        endpoint = Endpoint(**data["endpoint"])
        arm = ArmSpec(**data["arm"])
        http2 = data["policy"].get("http2", False)
        if data["policy"].get("http3", False):
            context = quic_settings(config)
        else:
            context = run_context(config, arm.name, http2=http2) if endpoint.tls else None
        prepared = Prepared(endpoint, context, data["targets"], [], data["origin"], quic=data.get("quic"))
        self.arm_index = data["index"]
        self.recorder = ArmRecorder(arm.name, tally_for(prepared.quic))
        swarm = Swarm(config, io.StringIO())
        swarm.policies[arm.name] = ConnectionPolicy(**data["policy"])
        user_class = swarm._user_class(arm, prepared, self.recorder, Load(**data["load"]))
        user_class.__name__ = USER_CLASS
        environment.user_classes = [user_class]
        self.send("tg_ready")

    def on_window(self, environment, msg, **_kw) -> None:
        self.recorder.start_window()
        self.cpu.sample()
        self.cpu_at_window = process_cpu_s()

    def on_tick(self, environment, msg, **_kw) -> None:
        point = self.recorder.roll_second(encode=True)
        cpu_pct, runq_pct = self.cpu.sample()
        counts = self.counts()
        self.send("tg_second", t_s=msg.data["t_s"], cpu_pct=cpu_pct, runq_pct=runq_pct, **point, **counts)

    def counts(self) -> dict:
        """Running totals for the unreachable-target rule (workers.engine.unreachable): attempts and
        connection failures by kind, warm-up included."""
        recorder = self.recorder
        return {
            "attempts": recorder.warmup_requests + recorder.requests,
            "conn_failures": dict(recorder.connection_failures),
        }

    def on_poll(self, environment, msg, **_kw) -> None:
        """The warm-up's once-a-second question (the window's ticks carry the same counts)."""
        if self.recorder is not None:
            self.send("tg_counts", **self.counts())

    def on_end(self, environment, msg, **_kw) -> None:
        self.recorder.close_window()
        result = self.recorder.result()
        result["warmup_requests"] = self.recorder.warmup_requests
        cpu_s = process_cpu_s() - self.cpu_at_window if self.recorder.window_start_ns else 0.0
        self.send("tg_result", result=result, cpu_s=round(cpu_s, 6))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.engine.distribution.generator")
    parser.add_argument("master_host")
    parser.add_argument("master_port", type=int)
    parser.add_argument("--host-label", default=socket.gethostname(), help="the host named in the report")
    parser.add_argument("--siblings", type=int, default=1, help="Locust workers started on this host")
    parser.add_argument("--ignore-term", action="store_true", help="a local worker: the master ends it")
    args = parser.parse_args(argv)
    if args.ignore_term:
        # A cancel signals the engine's whole process group; the master then ends the arm, collects
        # this worker's figures and tells it to quit. A timeout's SIGKILL still ends it at once.
        gevent.signal_handler(signal.SIGTERM, lambda: None)
        gevent.signal_handler(signal.SIGINT, lambda: None)
    env = Environment(user_classes=[ArmUser], events=Events())
    runner = env.create_worker_runner(args.master_host, args.master_port)
    gid = f"{args.host_label}:{os.getpid()}"
    Generator(runner, gid)
    runner.send_message(
        "tg_hello",
        {
            "gid": gid,
            "host": args.host_label,
            "pid": os.getpid(),
            "cpu_count": os.cpu_count(),
            "siblings": args.siblings,
        },
    )
    runner.greenlet.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
