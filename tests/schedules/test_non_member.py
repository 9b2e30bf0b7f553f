"""A schedule's runs belong to whoever saves it: the CLI (its --user, or the default superuser),
the page and the API refuse up front, with one reason, a user who may not start runs in the
scenario's project, instead of saving a schedule whose every firing is then refused. The page and
the API on Gunicorn, the CLI as an operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests
from django.urls import reverse

from portal.api import tokens
from portal.projects.models import Membership, Project, Role
from portal.runs import starting
from portal.schedules.models import Schedule
from tests.conftest import ROOT, database_url_for_children
from tests.gunicorn_portal import Browser

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "team-pass-5b2d"
ROLES = ("owner", "viewer")
DATA = {"plain_url": "http://127.0.0.1:9/1k", "tls_url": "https://127.0.0.1:9/1k", "arms": ["plain", "tls"]}


@pytest.fixture
def team(django_user_model):
    """Project "team" (owner, viewer), its scenario, and a superuser who is no member of it."""
    users = {
        name: django_user_model.objects.create_user(name, password=PASSWORD) for name in ("owner", "viewer")
    }
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    project = Project.objects.create(name="team")
    for name in ROLES:
        Membership.objects.create(project=project, user=users[name], role=name)
    return users, starting.save_scenario(project, "nightly", dict(DATA))


def schedule_cli(scenario, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "manage.py", "tollgate", "scenario", "schedule", str(scenario.code), *args]
    env = {**os.environ, "DATABASE_URL": database_url_for_children()}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)  # noqa: S603


def test_the_cli_refuses_a_user_who_may_not_start_runs_and_saves_nothing(team):
    _, scenario = team
    by_default = schedule_cli(scenario, "--cron", "0 2 * * *")
    assert by_default.returncode == 1, by_default
    assert "root may not start runs in team (not a member)" in by_default.stderr
    assert "pass --user" in by_default.stderr
    viewer = schedule_cli(scenario, "--cron", "0 2 * * *", "--user", "viewer")
    assert viewer.returncode == 1 and "viewer may not start runs in team (viewer)" in viewer.stderr
    assert not Schedule.objects.exists()
    # A member's schedule is saved; the superuser may still read it and remove it.
    assert schedule_cli(scenario, "--cron", "0 2 * * *", "--user", "owner").returncode == 0
    shown = schedule_cli(scenario)
    assert shown.returncode == 0 and "0 2 * * *" in shown.stdout
    assert Schedule.objects.get().created_by.username == "owner"


def test_the_page_and_the_api_refuse_with_the_same_reason(team, gunicorn_portal):
    users, scenario = team
    reason = "viewer may not start runs in team (viewer)"
    browser = Browser(gunicorn_portal.base_url, "127.0.0.30")
    assert browser.log_in("viewer", PASSWORD).status_code == 302
    page = browser.post(
        reverse("schedules-edit", args=[scenario.code]),
        {"when": "0 2 * * *", "time_zone": "UTC", "enabled": "on"},
    )
    assert page.status_code == 403 and reason.capitalize() in page.text

    # A member's run token, then the member is made a viewer: the token still reads, it schedules nothing.
    Membership.objects.filter(user=users["viewer"]).update(role=Role.MEMBER)
    _, token = tokens.issue(users["viewer"], scenario.project, scope="run", name="ci")
    Membership.objects.filter(user=users["viewer"]).update(role=Role.VIEWER)
    url = gunicorn_portal.base_url + reverse("api-scenario-schedule", args=[scenario.code])
    bearer = {"Authorization": f"Bearer {token}"}
    answer = requests.put(url, json={"cron": "0 2 * * *"}, headers=bearer, timeout=30)
    assert answer.status_code == 403 and answer.headers["Content-Type"] == "application/json"
    assert answer.json()["detail"].startswith(reason)
    # Refused before the schedule is read: a bad one is refused for the same reason.
    assert requests.put(url, json={"cron": "nonsense"}, headers=bearer, timeout=30).json()["status"] == 403
    assert requests.get(url, headers=bearer, timeout=30).json()["cron"] is None
    # Once not a member at all, the token itself is refused.
    Membership.objects.filter(user=users["viewer"]).delete()
    gone = requests.put(url, json={"cron": "0 2 * * *"}, headers=bearer, timeout=30)
    assert gone.status_code == 401 and gone.json()["status"] == 401
    assert not Schedule.objects.exists()
