"""The saturation search in the real engine against real local servers (issue 15, DESIGN §7).

A server that answers at most K requests/s (a pacing token bucket: each answer waits for its slot)
must show its knee near K, the server's; a fast nginx driven by one starved generator (the engine
pinned to one CPU beside a CPU hog of ours) must be reported as the generator's limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.nginx import Nginx
from portal.lib.stats import capacity
from tests.conftest import ROOT
from tests.engine_config import engine_config
from tests.servers import LocalServer, RateCapped

K_RPS = 500
# Each answer takes this long besides its slot (the server's work): one user cannot reach K alone.
SERVICE_S = 0.004


def run_search(config: dict, affinity: set[int] | None = None, timeout: float = 60) -> list[dict]:
    """The real engine on ``config``; pinned to the CPUs ``affinity`` before it reads its config (so
    before any load), by its pid: no preexec_fn in a process that may have threads."""
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "workers.engine"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        if affinity is not None:
            os.sched_setaffinity(proc.pid, affinity)
        out, err = proc.communicate(json.dumps(config), timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def search_config(url: str, sat: dict) -> dict:
    return engine_config(
        {"plain": url},
        spawn_rate=100,
        duration_s=0.5,
        saturation={"arms": ["plain"], "stage_s": 1.0, "warmup_s": 0.3, **sat},
    )


def stored(messages: list[dict], sat: dict) -> dict:
    points = [m["point"] for m in messages if m["type"] == "capacity"]
    settings = {"factor": 2.0, **sat}
    return {"settings": settings, "arms": {"plain": points}}


@pytest.mark.serial
def test_search_finds_the_knee_of_a_server_capped_at_k_requests_per_s():
    # Open loop (arrival rate); the closed loop (users) against a capped server, through the CLI and
    # the report: tests/runs/test_capacity.py.
    sat = {"mode": "rate", "start": 200, "max": 3200, "zoom": 3}
    server = LocalServer(app=RateCapped(K_RPS, SERVICE_S)).start()
    try:
        messages = run_search(search_config(server.url("/1k"), sat))
    finally:
        server.stop()
    assert messages[-1] == {"type": "done", "status": "succeeded"}
    # The stages are reported as capacity points, under their own name in progress, never as arms.
    assert [m["arm"] for m in messages if m["type"] == "arm"] == ["plain"]
    assert {m["arm"] for m in messages if m["type"] == "progress"} == {"plain", "plain@capacity"}
    entry = capacity.section(stored(messages, sat))["plain"]
    assert entry["limited_by"] == "server", entry
    assert abs(entry["max_rps"] - K_RPS) <= 0.15 * K_RPS, entry
    # The search stopped at the knee instead of stepping on to the max, and every stage was measured.
    loads = [p["load"] for p in entry["points"]]
    assert max(loads) < sat["max"] and all(p["requests"] > 0 for p in entry["points"])
    assert (
        entry["knee"][sat["mode"]] in loads
        and entry["knee"][sat["mode"]] > sat["start"]
        and entry["knee"]["ttlb_p50_us"] > 0
    )
    assert [row["fraction"] for row in entry["at_fraction"]] == [0.5, 0.8, 1.0]


@pytest.mark.serial
def test_a_starved_generator_is_reported_as_the_limit_not_the_server():
    cpu = min(os.sched_getaffinity(0))
    try:
        nginx = Nginx()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    # Our own CPU hog on the engine's CPU: the engine gets about half of one core.
    hog = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"]
    )
    try:
        with nginx:
            sat = {"mode": "users", "start": 2, "max": 16, "zoom": 0}
            messages = run_search(search_config(nginx.plain_url("/1k"), sat), affinity={cpu})
    finally:
        hog.kill()
        hog.wait()
    entry = capacity.section(stored(messages, sat))["plain"]
    assert entry["limited_by"] == "generator", entry
    busy = [p for p in entry["points"] if p["verdict"] == "generator"]
    assert busy and capacity.generator_busy(busy[0])
    needed = entry["generators_needed"]
    assert needed["processes"] >= 2 and needed["gen_cpu_us_per_request"] > 0
