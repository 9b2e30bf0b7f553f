"""The default scenario measures the server, not the client.

The run form's initial values (portal/lib/runs/runspec.py's defaults, shared with the CLI) go the whole way —
form → stored Run → real engine → report — against the demo target and a real nginx, and the
report's own ``generator_saturation`` check must not warn. Only the window is shorter than the
default's; the rate, the users and the loop are the default's.
"""

from __future__ import annotations

import pytest

from bench.nginx import Nginx
from portal.console.demo import start_demo_target, stop_processes
from portal.console.management.commands.tollgate import Command
from portal.lib.runs import runspec as defaults
from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from tests.servers import closed_port
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
# serial: its figures compare CPU or latency, so it runs alone, after the parallel part (Makefile).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.serial]

DURATION_S = 3.0


# The README demo's five HTTP/1.1 arms (the HTTP/2 and mTLS arms against the demo:
# tests/runs/test_demo_caddy.py).
ARMS = ("plain", "tls", "plain_new", "tls_new", "tls_resumed")


def default_run(owner, plain_url: str, tls_url: str, arms: list[str]) -> dict:
    """A run of the form's defaults (shorter window, given arms) through the real pipeline → report."""
    data = {name: field.initial for name, field in RunForm.base_fields.items() if field.initial is not None}
    data.update(plain_url=plain_url, tls_url=tls_url, arms=arms, verify_tls=False, duration_s=DURATION_S)
    form = RunForm(data=data)
    assert form.is_valid(), form.errors
    config = form.engine_config()
    assert (config["arrival_rate"], config["users"]) == (defaults.ARRIVAL_RATE, defaults.USERS)
    target = services.get_or_create_target(personal_project(owner), "defaults", plain_url, tls_url)
    run = runner.execute_run(services.create_run(owner, target, config).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    return reporting.run_report(run)


def check(report: dict, name: str) -> dict:
    return next(item for item in report["validity"] if item["check"] == name)


def test_the_default_against_the_demo_target_measures_the_server(owner, tmp_path, settings):
    """All five arms (the README's demo): no saturated generator, and tls_resumed resumes."""
    settings.VAR_DIR = tmp_path
    (tmp_path / "logs").mkdir()
    ports = {"plain_port": closed_port(), "tls_port": closed_port(), "mtls_port": closed_port()}
    demo = start_demo_target(tmp_path / "demo-target", **ports)
    try:
        report = default_run(owner, demo.plain_url, demo.tls_url, list(ARMS))
    finally:
        stop_processes(demo.procs)
    saturation = check(report, "generator_saturation")
    assert saturation["status"] == "pass", saturation
    assert check(report, "arrival_rate")["status"] == "pass"
    assert check(report, "tls_sessions")["status"] == "pass"
    resumed = report["arms"]["tls_resumed"]
    assert resumed["tls_sessions_reused"] >= 0.9 * resumed["requests"] > 0


def test_the_default_against_nginx_measures_the_server(owner):
    with Nginx() as nginx:
        report = default_run(owner, nginx.plain_url(), nginx.tls_url(), list(defaults.ARMS))
    saturation = check(report, "generator_saturation")
    assert saturation["status"] == "pass", saturation
    assert check(report, "arrival_rate")["status"] == "pass"
    assert list(report["arms"]) == list(defaults.ARMS)


def test_the_cli_defaults_are_the_forms():
    options = vars(Command().create_parser("manage.py", "tollgate").parse_args(["run"]))
    initial = {name: field.initial for name, field in RunForm.base_fields.items()}
    assert options["arms"].split(",") == initial["arms"] == list(defaults.ARMS)
    assert (options["users"], options["spawn_rate"]) == (initial["users"], initial["spawn_rate"])
    assert (options["warmup"], options["duration"]) == (initial["warmup_s"], initial["duration_s"])
    assert (options["think_time"], options["rounds"]) == (initial["think_time_s"], initial["rounds"])
    assert options["arrival_rate"] == initial["arrival_rate"] == defaults.ARRIVAL_RATE
    assert options["closed_loop"] is False


def test_think_time_needs_the_closed_loop():
    base = {"plain_url": "http://127.0.0.1:1/1k", "arms": ["plain"], "users": 1, "spawn_rate": 1}
    paced = RunForm(data={**base, "warmup_s": 0, "duration_s": 1, "think_time_s": 0.5, "arrival_rate": 10})
    assert not paced.is_valid() and "closed loop only" in paced.errors["think_time_s"][0]
    closed = RunForm(data={**base, "warmup_s": 0, "duration_s": 1, "think_time_s": 0.5, "arrival_rate": ""})
    assert closed.is_valid(), closed.errors
