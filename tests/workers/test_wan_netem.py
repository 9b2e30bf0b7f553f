"""The WAN model against real delay: the arms run through a network namespace whose loopback gets
``tc netem delay``, and each arm's measured TTLB lands within 10% of the projection made from the
same arms measured without delay (``portal.lib.stats.wan``).

Where the machine cannot (no ``ip``/``tc``, no privilege for a namespace, no ``sch_netem`` kernel
module: "Error: Specified qdisc kind is unknown."), the test skips with the tool's own words,
found by trying, never assumed. Only the namespace's own loopback is delayed; nginx and the engine
run inside it and it is deleted afterwards. Where it skips, ``test_wan_relay.py`` checks the same
model through a delaying relay (without the initial congestion window, which only netem delays
packet by packet). The run and the comparison are shared: ``wan_check.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers import wan_check

RTT_MS = 40.0
ROOT = Path(__file__).resolve().parents[2]


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603


@pytest.fixture
def namespace():
    """A fresh network namespace with its loopback up and netem proven to work on it; skips with the
    reason when any of that is impossible here."""
    ip, tc = shutil.which("ip"), shutil.which("tc")
    if not ip or not tc:
        pytest.skip("netem test: the ip and tc tools (iproute2) are not installed")
    name = f"tollgate-wan-{os.getpid()}"
    made = _run(ip, "netns", "add", name)
    if made.returncode:
        pytest.skip(f"netem test: cannot make a network namespace: {made.stderr.strip()}")
    try:
        _run(ip, "netns", "exec", name, ip, "link", "set", "lo", "up")
        probe = _run(
            ip, "netns", "exec", name, tc, "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"
        )
        if probe.returncode:
            pytest.skip(f"netem test: tc netem is not available here: {probe.stderr.strip()}")
        _run(ip, "netns", "exec", name, tc, "qdisc", "del", "dev", "lo", "root")
        yield name
    finally:
        _run(ip, "netns", "del", name)


# serial: it compares measured latency with the projection, so it runs alone (Makefile).
@pytest.mark.serial
def test_measured_ttlb_under_netem_lands_within_10_percent_of_the_projection(namespace):
    if not shutil.which("nginx") and not os.access("/usr/sbin/nginx", os.X_OK):
        pytest.skip("netem test: nginx not found")
    child = subprocess.run(  # noqa: S603
        ["ip", "netns", "exec", namespace, sys.executable, "-m", "tests.workers.netem_child", f"{RTT_MS:g}"],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    data = json.loads(child.stdout.strip().splitlines()[-1])
    base, delayed = data["base"], data["delayed"]
    # TLS 1.2's full handshake (2 round trips) is checked too, through the protocol matrix's sub-arms.
    assert {"tls_new@1.2", "tls_new@1.3"} <= set(base["variants"])
    wan_check.assert_within(wan_check.compare(base, delayed, RTT_MS))
