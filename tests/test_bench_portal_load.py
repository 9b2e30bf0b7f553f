"""bench/portal_load runs end to end in a seconds-long mode: its own database, Redis, nginx, the
portal on Gunicorn and Locust; the last line carries the figures, and no answer was wrong."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("report_views_per_s", "report_p95_ms", "compare_p95_ms", "status_p95_ms", "webhook_p95_ms", "errors")


def _exists(database: str) -> bool:
    url = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    with psycopg.connect(url._replace(path="/postgres").geturl(), autocommit=True) as conn:
        return bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchall())


def test_bench_portal_load_quick_run_prints_the_figures_without_errors():
    from bench.nginx import find_binary

    if not (find_binary() and shutil.which("redis-server")):
        pytest.skip("needs nginx and redis-server")
    proc = subprocess.Popen(  # noqa: S603 - this interpreter, our own script
        [sys.executable, str(ROOT / "bench" / "portal_load")]
        + ["--duration", "3", "--warmup", "1", "--readers", "2", "--webhook-interval", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr[-2000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert list(report)[: len(KEYS)] == list(KEYS)
    assert report["errors"] == 0, report["error_examples"]
    assert report["report_views_per_s"] > 0 and report["report_p95_ms"] > 0
    assert report["status_p95_ms"] > 0 and report["webhook_p95_ms"] > 0
    assert report["pages"]["webhook"]["requests"] >= 1 and report["pages"]["login"]["requests"] == 3
    assert report["cpu_s"]["gunicorn"] > 0 and report["settings"]["locust_processes"] == 1
    # Its private database is gone again.
    assert not _exists(f"tollgate_portal_load_{proc.pid}")
