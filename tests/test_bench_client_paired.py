"""bench/client_paired runs end to end briefly: the engine's client and the blocking reference take
turns on a throwaway nginx and the last line carries both medians per arm and phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.nginx import find_binary

ROOT = Path(__file__).resolve().parent.parent


def test_bench_client_paired_short_run_prints_both_clients():
    if not find_binary():
        pytest.skip("needs nginx")
    proc = subprocess.run(  # noqa: S603 - this interpreter, our own script
        [sys.executable, str(ROOT / "bench" / "client_paired"), "--seconds", "0.6", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-1500:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    (run,) = report["runs"]
    for arm in ("plain_new", "tls_new"):
        assert run[arm]["pairs"] > 0
        for phase in ("connect_us", "ttlb_us"):
            row = run[arm][phase]
            assert row["engine_p50"] > 0 and row["blocking_p50"] > 0
            assert isinstance(row["within"], bool)
        # TTLB contains the connect (and for TLS the handshake): same boundaries in both clients.
        assert run[arm]["ttlb_us"]["blocking_p50"] > run[arm]["connect_us"]["blocking_p50"]
        assert run[arm]["ttlb_us"]["engine_p50"] > run[arm]["connect_us"]["engine_p50"]
    assert run["tls_new"]["ttlb_us"]["engine_p50"] > run["plain_new"]["ttlb_us"]["engine_p50"]
    assert report["all_within"] == all(
        run[arm][phase]["within"] for arm in ("plain_new", "tls_new") for phase in ("connect_us", "ttlb_us")
    )
