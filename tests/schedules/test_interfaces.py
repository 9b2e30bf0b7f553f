"""The schedule from the portal, the CLI and the API: one service behind all three."""

from __future__ import annotations

import io
import json
import re
import zoneinfo
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal.audit.models import AuditEvent
from portal.projects.models import Membership, Project, Role
from portal.runs import starting
from portal.scenarios.models import Scenario
from portal.schedules import services
from portal.schedules.models import Schedule

pytestmark = pytest.mark.django_db
DATA = {"plain_url": "http://127.0.0.1:9/1k", "tls_url": "https://127.0.0.1:9/1k", "arms": ["plain", "tls"]}


@pytest.fixture
def team(django_user_model):
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider")
    }
    project = Project.objects.create(name="team")
    for role in ("owner", "member", "viewer"):
        Membership.objects.create(project=project, user=users[role], role=role)
    scenario = starting.save_scenario(project, "nightly", dict(DATA))
    return users, scenario


def tollgate(*args: str) -> str:
    out = io.StringIO()
    call_command("tollgate", *args, stdout=out)
    return out.getvalue()


def test_cli_schedules_prints_the_json_and_the_next_run_is_in_the_zone(team):
    users, scenario = team
    code = str(scenario.code)
    cron = ("scenario", "schedule", code, "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--user", "member")
    out = json.loads(tollgate(*cron, "--json"))
    assert set(out) >= {"scenario", "cron", "next_run_at"}
    assert (out["scenario"], out["cron"], out["time_zone"], out["enabled"]) == (
        code,
        "30 2 * * *",
        "Europe/Berlin",
        True,
    )
    upcoming = datetime.fromisoformat(out["next_run_at"]).astimezone(zoneinfo.ZoneInfo("Europe/Berlin"))
    assert (upcoming.hour, upcoming.minute) == (2, 30)
    assert Schedule.objects.get(scenario=scenario).created_by == users["member"]
    # Without --cron it shows the schedule; 'daily at' is the same cron; --off removes it.
    assert tollgate("scenario", "schedule", code, "--user", "viewer").startswith(
        f"scenario {code}: 30 2 * * *"
    )
    daily = json.loads(
        tollgate("scenario", "schedule", code, "--cron", "daily at 02:30", "--user", "owner", "--json")
    )
    assert daily["cron"] == "30 2 * * *" and daily["time_zone"] == "Europe/Berlin"  # the zone is kept
    off = json.loads(tollgate("scenario", "schedule", code, "--off", "--user", "owner", "--json"))
    assert off == {"scenario": code, "cron": None, "time_zone": None, "enabled": False, "next_run_at": None}


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--cron", "0 25 * * *", "--user", "member"), "--cron/--tz: The hour field '25'"),
        (("--cron", "0 2 * * *", "--tz", "Mars/Base", "--user", "member"), "no IANA time zone"),
        (("--cron", "0 2 * * *", "--user", "viewer"), "viewer may not start runs in team (viewer)"),
        (("--cron", "0 2 * * *", "--user", "outsider"), "no scenario with id"),
    ],
)
def test_cli_refuses_bad_schedules_and_users_who_may_not(team, args, says):
    _, scenario = team
    with pytest.raises(CommandError, match=re.escape(says)):
        tollgate("scenario", "schedule", str(scenario.code), *args)
    assert not Schedule.objects.exists()


def test_api_reads_sets_and_removes_the_schedule_within_the_token_project(team, client, bearer):
    users, scenario = team
    url = reverse("api-scenario-schedule", args=[scenario.code])
    member = bearer(users["member"], scenario.project, "run")
    got = client.get(url, **member).json()
    assert got == {
        "scenario": str(scenario.code),
        "cron": None,
        "time_zone": None,
        "enabled": False,
        "next_run_at": None,
    }
    answer = client.put(
        url, {"cron": "daily at 06:15", "time_zone": "UTC"}, content_type="application/json", **member
    )
    assert answer.status_code == 200, answer.content
    assert answer.json()["cron"] == "15 6 * * *" and answer.json()["next_run_at"].endswith("06:15:00Z")
    bad = client.put(url, {"cron": "every day"}, content_type="application/json", **member)
    assert bad.status_code == 400 and "5 fields" in bad.json()["errors"]["cron"][0]
    read = bearer(users["viewer"], scenario.project, "read")
    assert client.get(url, **read).json()["cron"] == "15 6 * * *"
    assert client.delete(url, **read).status_code == 403
    other = Project.objects.create(name="other")
    Membership.objects.create(project=other, user=users["outsider"], role=Role.OWNER)
    assert client.get(url, **bearer(users["outsider"], other, "run")).status_code == 404
    assert client.delete(url, **member).json()["cron"] is None and not Schedule.objects.exists()


def test_portal_page_sets_the_schedule_and_the_scenario_page_shows_the_next_run(team, client):
    users, scenario = team
    edit = reverse("schedules-edit", args=[scenario.code])
    detail = reverse("scenarios-detail", args=[scenario.code])
    client.force_login(users["member"])
    assert "Schedule it…" in client.get(detail).content.decode()
    refused = client.post(edit, {"when": "2 * *", "time_zone": "UTC", "enabled": "on"})
    assert refused.status_code == 400 and "5 fields" in refused.content.decode()
    saved = client.post(edit, {"when": "daily at 02:00", "time_zone": "America/New_York", "enabled": "on"})
    assert saved.status_code == 302
    schedule = Schedule.objects.get(scenario=scenario)
    page = client.get(detail).content.decode()
    upcoming = services.next_run_at(schedule)
    assert f'Next run at <time datetime="{upcoming.isoformat()}">{upcoming:%Y-%m-%d %H:%M} UTC</time>' in page
    assert "02:00 America/New_York)" in page and '<code id="schedule-cron">0 2 * * *</code>' in page
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.SCENARIO_CHANGED).latest("time")
    assert event.detail["schedule"] == {"cron": "0 2 * * *", "time_zone": "America/New_York", "enabled": True}
    assert client.post(edit, {"action": "remove"}).status_code == 302 and not Schedule.objects.exists()


def test_portal_page_is_for_members_viewers_see_the_section_outsiders_nothing(team, client):
    users, scenario = team
    services.set_schedule(scenario, users["owner"], "0 3 * * *")
    edit = reverse("schedules-edit", args=[scenario.code])
    client.force_login(users["viewer"])
    page = client.get(reverse("scenarios-detail", args=[scenario.code])).content.decode()
    assert "Next run at" in page and "Change the schedule" not in page
    assert client.get(edit).status_code == 403
    assert client.post(edit, {"action": "remove"}).status_code == 403 and Schedule.objects.exists()
    client.force_login(users["outsider"])
    assert client.get(edit).status_code == 404
    client.logout()
    assert client.get(edit).status_code == 302  # to the login
    client.force_login(users["owner"])
    assert client.put(edit).status_code == 405


def test_the_tolerance_is_set_by_the_cli_and_the_edit_page_and_listed(team, client, bearer):
    users, scenario = team
    project = scenario.project
    made = ("scenario", "create", "--project", "team", "--owner", "owner", "--name", "tol", "--json") + (
        "--plain-url",
        DATA["plain_url"],
        "--tls-url",
        DATA["tls_url"],
        "--insecure",
    )
    saved = json.loads(tollgate(*made, "--tolerance-pct", "25"))
    assert Scenario.objects.get(code=saved["id"]).tolerance_pct == 25.0
    json.loads(tollgate(*made))  # the same command without it: the default again
    assert Scenario.objects.get(code=saved["id"]).tolerance_pct == 10.0
    with pytest.raises(CommandError, match="--tolerance-pct: Expected a number of percent"):
        tollgate(*made, "--tolerance-pct", "-1")
    listed = client.get(reverse("api-scenarios"), **bearer(users["viewer"], project, "read")).json()
    assert {row["name"]: row["tolerance_pct"] for row in listed["results"]} == {"nightly": 10.0, "tol": 10.0}
    assert project.name == "team"
