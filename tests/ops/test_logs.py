"""TOLLGATE_LOG_FORMAT=json: every log line a process writes is one JSON object (python-json-logger)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = """
import logging, django
django.setup()
log = logging.getLogger("portal.ops.test")
log.warning("disk %s is %d%% full", "/var", 93)
try:
    1 / 0
except ZeroDivisionError:
    log.exception("it failed\\non two lines")
logging.getLogger("django.request").error("Not Found: /x")
"""


def _run(log_format: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOLLGATE_LOG_FORMAT": log_format, "DJANGO_SETTINGS_MODULE": "portal.settings"}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def test_json_logs_are_one_object_per_line():
    proc = _run("json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    records = [json.loads(line) for line in lines]  # every line parses: no multi-line traceback
    assert len(records) == 3, lines
    first, failed, request = records
    assert first["message"] == "disk /var is 93% full"
    assert first["level"] == "WARNING" and first["logger"] == "portal.ops.test"
    assert first["time"][:2] == "20" and "T" in first["time"] and isinstance(first["process"], int)
    assert failed["message"] == "it failed\non two lines"
    assert "ZeroDivisionError" in failed["exc_info"]
    assert request["logger"] == "django.request" and request["level"] == "ERROR"


def test_text_logs_stay_the_default():
    proc = _run("")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "disk /var is 93% full" in proc.stderr
    assert not proc.stderr.lstrip().startswith("{")


def test_an_unknown_log_format_refuses_to_start():
    proc = _run("xml")
    assert proc.returncode != 0
    assert "TOLLGATE_LOG_FORMAT must be text or json, got 'xml'" in proc.stderr
