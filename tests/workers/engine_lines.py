"""The real engine subprocess read line by line, so a test can act at a known point of a run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT


class Engine:
    """The engine subprocess, read line by line, so the test can act at a known point of the arm."""

    def __init__(self, config: dict, env: dict | None = None) -> None:
        self.proc = subprocess.Popen(  # noqa: S603
            [sys.executable, "-m", "workers.engine"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            start_new_session=True,  # as workers.driver starts it: a cancel signals the whole group
        )
        self.proc.stdin.write(json.dumps(config))
        self.proc.stdin.close()
        self.messages: list[dict] = []

    def until(self, wanted) -> dict:
        for line in self.proc.stdout:
            message = json.loads(line)
            self.messages.append(message)
            if wanted(message):
                return message
        raise AssertionError(f"the engine ended first: {self.messages[-3:]}")

    def rest(self, timeout_s: float = 60) -> tuple[list[dict], int, float]:
        """The messages to the end, the exit code and when it exited (monotonic)."""
        rest = [json.loads(line) for line in self.proc.stdout]
        code = self.proc.wait(timeout=timeout_s)
        self.messages += rest
        return rest, code, time.monotonic()

    def terminate(self) -> float:
        """SIGTERM to the engine's process group, as a cancel does (workers.driver); returns when."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        return time.monotonic()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
