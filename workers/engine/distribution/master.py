"""Distributed runs on Locust's own master/worker mode (``EngineConfig.generators`` != 1).

The engine process becomes a Locust master (``Fleet``) and starts N local Locust worker processes
(``python -m workers.engine.distribution.generator``) in its own process group; other generator hosts may join
(``workers.tasks.join_run``). Per arm the master sends the arm to its workers (``tg_arm``), lets Locust
split the users across them, decides the warm-up's end, each measured second and the window's end
(``tg_window``, ``tg_tick``, ``tg_end``), and merges the workers' per-second buckets and final recorder
results exactly (``portal.lib.stats.generators``). A worker that never connects or is lost mid-arm is
reported with its share and the arm is marked partial. Documented in docs/engine-protocol.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

import gevent
from locust import User, constant, task
from locust.env import Environment
from locust.event import Events
from locust.exception import RPCError

from portal.lib.runs.protocol import EXIT_ARM_ERROR, emit

USER_CLASS = "ArmUser"
TICK_S = 1.0
SECOND_WAIT_S = 0.5  # how long a tick waits for the workers' buckets of that second
READY_TIMEOUT_S = 15.0  # for the workers to build an arm's user class
RESULT_TIMEOUT_S = 10.0  # for the workers' results after the window's end
ENGINE_T0 = time.monotonic()  # "seconds into the run" of a lost worker count from here
_PR_SET_PDEATHSIG = 1


def run_elapsed_s() -> float:
    return round(time.monotonic() - ENGINE_T0, 3)


class ArmUser(User):
    """The master's stand-in for an arm's user class: only its name travels (Locust dispatches users by
    class name); each worker builds the real class per arm under this name."""

    wait_time = constant(1)

    @task
    def idle(self) -> None:  # never run: the master spawns no users itself
        pass


class GeneratorsLost(Exception):
    pass


def _die_with_master() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Fleet:
    """The Locust master of one engine process and the Locust workers it knows about."""

    @classmethod
    def of(cls, swarm) -> Fleet:
        fleet = getattr(swarm, "fleet", None)
        if fleet is None:
            fleet = swarm.fleet = cls(swarm)
            fleet.start()
        return fleet

    @staticmethod
    def close_of(swarm) -> None:
        fleet = getattr(swarm, "fleet", None)
        if fleet is not None:
            fleet.close()

    def __init__(self, swarm) -> None:
        self.swarm = swarm
        self.config = swarm.config
        bind = self.config.master_bind
        self.local_host = "127.0.0.1" if bind in ("*", "0.0.0.0") else bind  # noqa: S104 - a setting's value
        self.env = Environment(user_classes=[ArmUser], events=Events())
        self.runner = self.env.create_master_runner(bind, self.config.master_port)
        self.port = self.runner.server.port
        self.workers: dict[str, dict] = {}  # gid -> {"id", "host", "pid", "client_id", "lost_at", ...}
        self.procs: dict[int, subprocess.Popen] = {}
        self.ready: set[str] = set()
        self.seconds: dict[str, list[dict]] = {}
        self.results: dict[str, dict] = {}
        # gid -> (attempts, {kind: connection failures}): each worker's running totals in this arm
        self.counts: dict[str, tuple[int, dict[str, int]]] = {}
        self.arm_index = -1
        for name, handler in (
            ("tg_hello", self.on_hello),
            ("tg_ready", self.on_ready),
            ("tg_second", self.on_second),
            ("tg_counts", self.on_counts),
            ("tg_result", self.on_result),
        ):
            self.runner.register_message(name, handler)

    # Messages from the workers (quick; handled in order in the master's listener greenlet).
    def on_hello(self, environment, msg, **_kw) -> None:
        data = msg.data
        self.workers[data["gid"]] = {
            "id": data["gid"],
            "host": data["host"],
            "pid": data["pid"],
            "client_id": msg.node_id,
            "cpu_count": data.get("cpu_count"),
            "siblings": data.get("siblings", 1),
            "joined_at": run_elapsed_s(),
            "lost_at": None,
            "lost_reason": None,
        }
        emit(
            self.swarm.out,
            "generator",
            event="joined",
            id=data["gid"],
            host=data["host"],
            at_s=run_elapsed_s(),
        )

    def _current(self, msg) -> bool:
        return msg.data.get("index") == self.arm_index and msg.data.get("gid") in self.workers

    def on_ready(self, environment, msg, **_kw) -> None:
        if self._current(msg):
            self.ready.add(msg.data["gid"])

    def on_second(self, environment, msg, **_kw) -> None:
        if self._current(msg):
            self.seconds.setdefault(msg.data["gid"], []).append(msg.data)
            self.on_counts(environment, msg)

    def on_counts(self, environment, msg, **_kw) -> None:
        if self._current(msg) and "attempts" in msg.data:
            self.counts[msg.data["gid"]] = (msg.data["attempts"], msg.data.get("conn_failures") or {})

    def on_result(self, environment, msg, **_kw) -> None:
        if self._current(msg):
            self.results[msg.data["gid"]] = msg.data

    # The fleet's life.
    def start(self) -> None:
        """Start the local Locust workers and wait for them (and for the other hosts the task invited,
        ``EngineConfig.remote_hosts``) to connect; the ones that do not are reported lost at start."""
        count = self.config.generators or min(os.cpu_count() or 1, self.config.max_generators)
        emit(
            self.swarm.out, "generator", event="master", host=self.local_host, port=self.port, processes=count
        )
        for _ in range(count):
            proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
                [
                    sys.executable,
                    "-m",
                    "workers.engine.distribution.generator",
                    self.local_host,
                    str(self.port),
                    "--ignore-term",
                ],
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_master,  # noqa: PLW1509 - only a prctl
            )
            self.procs[proc.pid] = proc
        remote_hosts = self.config.remote_hosts
        deadline = time.monotonic() + self.config.generator_connect_s
        while time.monotonic() < deadline and not self.swarm.cancelled:
            pids = {w["pid"] for w in self.workers.values() if w["host"] == self._own_label()}
            exited = {pid for pid, proc in self.procs.items() if proc.poll() is not None}
            if set(self.procs) <= pids | exited and self._remote_joined(remote_hosts):
                break
            gevent.sleep(0.05)
        self._missing_at_start()
        self._remote_missing(remote_hosts)

    def _joined_by_host(self) -> dict[str, list[int]]:
        """Other hosts' joined workers: host → the worker count each said its host started."""
        joined: dict[str, list[int]] = {}
        for worker in self.workers.values():
            if worker["host"] != self._own_label() and worker.get("pid"):
                joined.setdefault(worker["host"], []).append(worker.get("siblings") or 1)
        return joined

    def _remote_joined(self, hosts: list[str]) -> bool:
        """Every invited host joined, each with all the workers it said it started."""
        joined = self._joined_by_host()
        return set(hosts) <= set(joined) and all(len(counts) >= max(counts) for counts in joined.values())

    def _remote_missing(self, hosts: list[str]) -> None:
        """An invited host that did not join, or joined with fewer workers than it started: lost at start."""
        joined = self._joined_by_host()
        wait = f"within {self.config.generator_connect_s:g} s"
        for host in hosts:
            if host not in joined:
                self.lose(f"{host}:?", f"the invited generator host did not join {wait}", host=host)
        for host, counts in joined.items():
            for missing in range(max(counts) - len(counts)):
                self.lose(
                    f"{host}:?{missing + 1}",
                    f"{max(counts)} workers started, {len(counts)} joined {wait}",
                    host=host,
                )

    @staticmethod
    def _own_label() -> str:
        return socket.gethostname()

    def _missing_at_start(self) -> None:
        joined = {w["pid"] for w in self.workers.values() if w["host"] == self._own_label()}
        for pid, proc in self.procs.items():
            if pid in joined:
                continue
            code = proc.poll()
            reason = (
                f"exited with code {code} before connecting"
                if code is not None
                else f"did not connect within {self.config.generator_connect_s:g} s"
            )
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            self.lose(f"{self._own_label()}:{pid}", reason, host=self._own_label(), pid=pid)

    def lose(self, gid: str, reason: str, **known) -> None:
        worker = self.workers.setdefault(gid, {"id": gid, "client_id": None, "joined_at": None, **known})
        if worker.get("lost_at") is not None:
            return
        worker.update(lost_at=run_elapsed_s(), lost_reason=reason)
        emit(
            self.swarm.out,
            "generator",
            event="lost",
            id=gid,
            host=worker.get("host"),
            at_s=worker["lost_at"],
            reason=reason,
        )

    def live(self, among=None) -> list[str]:
        gids = self.workers if among is None else among
        return [gid for gid in gids if self.workers[gid]["lost_at"] is None]

    def check_lost(self) -> None:
        """A local worker whose process exited, or any worker Locust marked missing (no heartbeat)."""
        states = {client.id: client.state for client in self.runner.clients.all}
        for gid in self.live():
            worker = self.workers[gid]
            proc = self.procs.get(worker.get("pid")) if worker["host"] == self._own_label() else None
            if proc is not None and proc.poll() is not None:
                self.lose(gid, f"process exited with code {proc.returncode}")
            elif states.get(worker["client_id"]) == "missing":
                self.lose(gid, "missed its heartbeats")

    def send(self, kind: str, data: dict, gids: list[str]) -> None:
        for gid in gids:
            try:
                self.runner.send_message(
                    kind, {"index": self.arm_index, **data}, client_id=self.workers[gid]["client_id"]
                )
            except RPCError as exc:
                self.lose(gid, f"unreachable: {exc}")

    def wait_for(self, done, gids: list[str], timeout_s: float) -> None:
        """Until ``done(gid)`` for every live worker of ``gids``, a timeout, or (checked) their loss."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.check_lost()
            if all(done(gid) for gid in self.live(gids)):
                return
            gevent.sleep(0.01)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.runner.quit()
        deadline = time.monotonic() + 5
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def fail(self, arm_name: str, error: str) -> None:
        emit(self.swarm.out, "arm_error", arm=arm_name, error=error)
        self.close()
        raise SystemExit(EXIT_ARM_ERROR)
