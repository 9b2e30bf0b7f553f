"""bench/generator runs end to end in a tiny mode and prints its figures as the last line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_bench_generator_tiny_run_prints_the_ratios():
    from bench.nginx import find_binary

    if not (find_binary() and shutil.which("wrk") and shutil.which("openssl")):
        pytest.skip("needs nginx, wrk and openssl")
    proc = subprocess.run(  # noqa: S603 - this interpreter, our own script
        [
            sys.executable,
            str(ROOT / "bench" / "generator"),
            "--duration",
            "1",
            "--warmup",
            "0.2",
            "--users",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("keepalive_plain_vs_wrk", "keepalive_tls_vs_wrk", "handshakes_vs_s_time", "scaling_2"):
        assert report[key] > 0, key
    assert report["engine"]["plain"]["requests"] > 0 and report["wrk"]["plain"]["requests"] > 0
    assert report["s_time"]["connections"] > 0
    assert set(report["overhead"]) == {"plain_new", "tls_new"}
