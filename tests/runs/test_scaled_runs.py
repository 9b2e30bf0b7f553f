"""Issue 15's "done when": a run with 2 generator processes (Locust master + 2 Locust workers) and a
saturation search completes from the CLI and from the portal (the form, a real Celery worker), against
a real local server capped at 150 req/s; the report's ``generators`` add up exactly to each arm and its
``capacity`` holds the searched arm's knee. Tiny stages: each run takes 15–20 s here."""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from portal.lib.stats import capacity
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership, Project, Role
from portal.runs import reporting
from portal.runs.models import Run
from tests.servers import LocalServer, RateCapped

# One closed-loop user gets ~90 req/s (10 ms of service each); two reach the cap; four are flat there.
CAP_RPS, SERVICE_S = 150, 0.010
LIMITS = set(capacity.LIMITS.values())


@pytest.fixture
def capped_server():
    server = LocalServer(app=RateCapped(CAP_RPS, service_s=SERVICE_S)).start()
    yield server
    server.stop()


def _check_scaled_report(report: dict) -> None:
    """Two Locust workers whose per-arm shares add up exactly, and the searched arm's capacity."""
    entries = report["generators"]
    assert len(entries) == 2 and len({e["id"] for e in entries}) == 2, entries
    assert all(e["lost_at"] is None and e["host"] for e in entries), entries
    for name, arm in report["arms"].items():
        assert arm["requests"] > 0
        assert sum(e["arms"][name]["requests"] for e in entries) == arm["requests"], name
    assert set(report["capacity"]) == {"plain"}
    searched = report["capacity"]["plain"]
    assert {"max_rps", "knee", "limited_by", "points"} <= set(searched)
    assert searched["mode"] == "users" and searched["limited_by"] in LIMITS, searched
    coarse = [p["load"] for p in searched["points"] if p["phase"] == "coarse"]
    busy = [
        (p["load"], p["verdict"], p["gen_cpu_pct"], p["gen_runq_pct"], p["loop_lag_ms"])
        for p in searched["points"]
    ]
    if coarse == [1]:
        # A machine so busy that even the first stage's generator waited for a CPU (run-queue wait or
        # loop lag over the check's bound, seen in CI with six test processes on two cores): the search
        # stops there and says the generator limited it, with the figures that show it, and no knee.
        first = searched["points"][0]
        assert first["verdict"] == "generator" and capacity.generator_busy(first), busy
        assert searched["limited_by"] == "generator" and searched["knee"] is None, busy
        return
    # × 2 up to the maximum (then zoom stages, if any); a machine too busy to let 2 users gain on 1 ends
    # the search at 2 (its knee), which the report says through limited_by.
    assert coarse in ([1, 2], [1, 2, 4]), busy
    assert all(p["requests"] > 0 for p in searched["points"])
    knee = searched["knee"]
    assert knee is not None and knee["rps"] == searched["max_rps"] > 0 and knee["users"] in (1, 2, 3, 4)
    assert knee["ttlb_p50_us"] <= knee["ttlb_p99_us"]
    assert searched["max_rps"] <= CAP_RPS * 1.15  # never more than the server serves


@pytest.mark.django_db(transaction=True)
def test_cli_run_with_two_generators_and_a_saturation_search(owner, capped_server, settings):
    settings.TOLLGATE_GENERATOR_HOSTS = ""  # this host's processes only, whatever else is on the broker
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    try:
        call_command(
            "tollgate", "run", "--owner", owner.username, "--plain-url", capped_server.url("/1k"),
            "--arms", "plain", "--users", "2", "--closed-loop", "--warmup", "0.3", "--duration", "1",
            "--generators", "2", "--saturation", "plain", "--saturation-max", "4", "--saturation-stage", "1",
            "--json", stdout=out, stderr=err,
        )  # fmt: skip
    except SystemExit as exc:  # the run did not succeed: its error is on stderr
        pytest.fail(f"exit {exc.code}: {err.getvalue()}")
    assert time.monotonic() - started < 60, err.getvalue()
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert f"run {run.code} succeeded" in err.getvalue()
    report = json.loads(out.getvalue())
    assert report["run"]["config"]["generators"] == 2
    _check_scaled_report(report)
    assert report == json.loads(json.dumps(reporting.export_report(run)))  # what was printed is stored


@pytest.fixture
def no_other_generator_hosts(monkeypatch):
    """For the Celery worker started after it: invite no other generator host on the broker."""
    monkeypatch.setenv("TOLLGATE_GENERATOR_HOSTS", "")


def test_portal_run_with_two_generators_and_a_saturation_search(
    client, owner, capped_server, no_other_generator_hosts, celery_worker
):
    team = Project.objects.create(name="capacity team")
    Membership.objects.create(project=team, user=owner, role=Role.MEMBER)
    client.force_login(owner)
    session = client.session
    session[SESSION_KEY] = str(team.code)
    session.save()
    form = {
        "plain_url": capped_server.url("/1k"),
        "arms": ["plain"],
        "users": "2",
        "spawn_rate": "10",
        "warmup_s": "0.3",
        "duration_s": "1",
        "arrival_rate": "",  # closed loop
        "generators": "2",
        "saturation_arms": ["plain"],
        "saturation_mode": "users",
        "saturation_max": "4",
        "saturation_stage_s": "1",
    }
    response = client.post(reverse("runs-new"), form)
    assert response.status_code == 302, response.content.decode()[-2000:]
    run = Run.objects.get()
    assert response["Location"] == reverse("runs-detail", args=[run.code])
    assert run.project == team and run.config["generators"] == 2 and run.config["saturation"]["max"] == 4
    deadline = time.monotonic() + 90
    while not run.is_terminal:
        assert celery_worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"still {run.status} after 90 s"
        time.sleep(0.5)
        run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    _check_scaled_report(report)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="capacity-summary"' in page and 'id="chart-capacity"' in page and 'id="capacity-data"' in page
    # Each stage a row of the curve, its verdict its class: as many good rows as good stages (none when a
    # busy machine's first stage was already generator-bound, which _check_scaled_report allows).
    points = report["capacity"]["plain"]["points"]
    for verdict in {p["verdict"] for p in points}:
        assert page.count(f'<tr class="{verdict}">') == sum(p["verdict"] == verdict for p in points), verdict
    assert page.count('<tr class="good">') >= 1 or points[0]["verdict"] == "generator"
    assert 'id="generators-table"' in page and all(
        f"<code>{e['id']}</code>" in page for e in report["generators"]
    )
    assert "Then a saturation search of plain: users from 1 up to 4" in page
    assert "A generator was lost" not in page
