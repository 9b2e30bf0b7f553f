"""The saturation search through the portal: form, API, quotas, the CLI run end to end (a real engine
against a real rate-capped server), the stored stages, the report's ``capacity`` and the page."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal.lib.runs import quotas
from portal.runs import reporting
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.runs.starting import RunRefused, form_data
from tests.servers import LocalServer, RateCapped

BASE = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "users": 1,
    "spawn_rate": 1,
    "warmup_s": 1,
    "duration_s": 5,
    "rounds": 1,
    "verify_tls": "on",
}


@pytest.mark.django_db
def test_form_turns_the_fieldset_into_the_engine_setting_and_checks_it():
    form = RunForm(
        {**BASE, "arms": ["plain", "tls_new"], "saturation_arms": ["tls_new"], "saturation_max": "16"}
    )
    assert form.is_valid(), form.errors
    sat = form.engine_config()["saturation"]
    assert (
        sat["arms"] == ["tls_new"] and sat["max"] == 16 and sat["mode"] == "users" and sat["stage_s"] == 2.0
    )
    none = RunForm({**BASE, "arms": ["plain"]})
    assert none.is_valid() and none.engine_config()["saturation"] is None
    bad = RunForm({**BASE, "arms": ["plain"], "saturation_arms": ["tls_new"]})
    assert not bad.is_valid() and "not among the run's arms" in bad.errors["saturation_arms"][0]


@pytest.mark.django_db
def test_quotas_count_every_stage_and_hold_the_maximum_to_the_limits():
    limits = quotas.Limits(64, 1000.0, 60.0, 10.0, 5, 10_000_000, 2, 100)
    config = {"arms": ["plain"], "users": 1, "warmup_s": 1, "duration_s": 1}
    plain = quotas.planned_requests(config)
    searched = quotas.planned_requests({**config, "saturation": {"max": 8, "stage_s": 1, "warmup_s": 0}})
    # Stages 1, 2, 4, 8 and 3 zoom stages at 8 users, 1 s each, 1000 req/s per user at most.
    assert searched - plain == (1 + 2 + 4 + 8 + 3 * 8) * 1000
    problems = quotas.check(limits, {**config, "saturation": {"max": 128}}, "p")
    assert [field for field, _ in problems] == ["saturation_max"] and "64 users" in problems[0][1]
    rate = quotas.check(limits, {**config, "saturation": {"mode": "rate", "start": 10, "max": 5000}}, "p")
    assert rate[0][0] == "saturation_max" and "1000 req/s" in rate[0][1]


def test_api_body_maps_to_the_form_and_refuses_unknown_keys():
    fields = form_data({"saturation": {"arms": "plain, tls_new", "mode": "rate", "max": 900}})
    assert fields["saturation_arms"] == ["plain", "tls_new"] and fields["saturation_mode"] == "rate"
    assert fields["saturation_max"] == 900 and fields["saturation_start"] == ""
    assert form_data({"saturation": None})["saturation_arms"] == []
    with pytest.raises(RunRefused, match="Unknown key"):
        form_data({"saturation": {"ceiling": 3}})


# serial: it compares the measured throughput with the servers' caps. Closed loop (users): the
# search's users mode against a server capped at K req/s (tests/workers/test_saturation.py: rate mode).
@pytest.mark.serial
@pytest.mark.django_db(transaction=True)
def test_cli_search_stores_the_stages_and_the_report_shows_the_knees_and_the_cost_of_tls(
    owner, client, tls_cert
):
    plain = LocalServer(app=RateCapped(400, service_s=0.003)).start()
    # ~1.3 ms of generator CPU per new TLS connection here: 120/s keeps the generator far from busy.
    tls = LocalServer(tls=tls_cert, app=RateCapped(120, service_s=0.006)).start()
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "tollgate", "run", "--owner", owner.username, "--plain-url", plain.url("/1k"), "--tls-url",
            tls.url("/1k"), "--arms", "plain,tls_new", "--insecure", "--users", "1", "--warmup", "0.2",
            "--duration", "1", "--saturation", "--saturation-max", "8", "--saturation-stage", "1",
            stdout=out, stderr=err,
        )  # fmt: skip
    finally:
        plain.stop()
        tls.stop()
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED, run.error
    points = run.capacity["arms"]["plain"]
    assert run.capacity["settings"]["max"] == 8 and points and points[0]["load"] == 1
    text = out.getvalue()
    assert "capacity plain: max" in text and "capacity tls_new: max" in text and "limited by server" in text
    report = json.loads(json.dumps(reporting.run_report(run)))
    cap = report["capacity"]
    assert cap["plain"]["limited_by"] == cap["tls_new"]["limited_by"] == "server", cap
    assert cap["plain"]["max_rps"] == pytest.approx(400, rel=0.15)
    # tls_new: every request a new connection and a full handshake (none resumed).
    assert cap["tls_new"]["max_handshakes_per_s"] == pytest.approx(cap["tls_new"]["max_rps"], rel=0.02)
    assert cap["tls_new"]["max_rps"] == pytest.approx(120, rel=0.2)
    assert report["capacity_cost"].startswith("Handshakes cap this server at ")
    assert "capacity Handshakes cap this server" in text
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="chart-capacity"' in page and 'id="capacity-data"' in page and 'id="capacity-cost"' in page
    assert page.count('<tr class="good">') >= 2
    assert "Then a saturation search of plain, tls_new: users from 1 up to 8" in page
    with pytest.raises(CommandError, match="--saturation"):
        call_command("tollgate", "run", "--owner", owner.username, "--plain-url", plain.url(), "--arms",
                     "plain", "--saturation", "tls_new")  # fmt: skip


@pytest.mark.django_db
def test_run_form_page_has_the_capacity_fieldset(owner, client):
    client.force_login(owner)
    page = client.get(reverse("runs-new")).content.decode()
    assert "<summary>Capacity: saturation search</summary>" in page
    for field in (
        "saturation_arms",
        "saturation_mode",
        "saturation_start",
        "saturation_max",
        "saturation_stage_s",
    ):
        assert f'id="field-{field}"' in page


@pytest.mark.django_db
def test_scenario_cli_saves_the_search_and_its_runs_carry_it(owner):
    from portal.projects.models import Membership, Project, Role
    from portal.runs.starting import check
    from portal.scenarios.models import Scenario

    team = Project.objects.create(name="team")
    Membership.objects.create(project=team, user=owner, role=Role.OWNER)
    call_command(
        "tollgate", "scenario", "create", "--project", "team", "--owner", owner.username, "--name", "cap",
        "--plain-url",
        "http://127.0.0.1:9/1k", "--arms", "plain", "--duration", "2", "--saturation", "plain",
        "--saturation-mode", "rate", "--saturation-max", "500", stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip
    scenario = Scenario.objects.get(name="cap")
    form = check(team, {}, scenario=scenario)
    sat = form.engine_config()["saturation"]
    assert sat["arms"] == ["plain"] and sat["mode"] == "rate" and sat["max"] == 500.0
    overridden = check(team, {"saturation": None}, scenario=scenario)
    assert overridden.engine_config()["saturation"] is None
