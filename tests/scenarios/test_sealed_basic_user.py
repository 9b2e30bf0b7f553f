"""A saved scenario keeps its Basic user name sealed with the password, never in its clear values; a
run from it with the user field blank still sends both (read by a real server), and scenarios saved
before lose the clear copy."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection
from django.urls import reverse

from portal import vault
from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.scenarios.secrets import scenario_config

NAME = "sylvie-5d1a"
SECRET = "pw-3b77-secret"
FORM = {
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["tls"],
    "users": "1",
    "spawn_rate": "1",
    "warmup_s": "0",
    "duration_s": "1",
    "auth_type": "basic",
}

pytestmark = pytest.mark.django_db


def stored_text(scenario: Scenario) -> str:
    with connection.cursor() as cursor:
        table = Scenario._meta.db_table
        cursor.execute(f"SELECT config::text FROM {table} WHERE id = %s", [scenario.pk])  # noqa: S608
        return cursor.fetchone()[0]


def test_a_saved_scenario_holds_the_basic_user_sealed_only_and_a_rerun_keeps_it(
    client, owner, broker, django_capture_on_commit_callbacks
):
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        saved = client.post(
            reverse("runs-new"), {**FORM, "auth_user": NAME, "auth_secret": SECRET, "save_as": "sealed"}
        )
    assert saved.status_code == 302
    scenario = Scenario.objects.get(name="sealed")
    text = stored_text(scenario)
    assert NAME not in text and SECRET not in text
    assert vault.unseal(scenario.config["secrets"])["auth"] == {
        "type": "basic",
        "user": NAME,
        "secret": SECRET,
    }

    # The scenario's form shows no user; left blank, the run gets the saved user and password.
    page = client.get(reverse("runs-new") + f"?scenario={scenario.code}")
    assert NAME not in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post(reverse("runs-new"), {**FORM, "scenario": str(scenario.code)})
    assert again.status_code == 302, again.context["form"].errors
    opened = vault.unseal(Run.objects.latest("pk").config["secrets"])
    assert opened["auth"] == {"type": "basic", "user": NAME, "secret": SECRET}

    # A new password typed needs its user typed too: the saved user belongs to the saved password.
    refused = client.post(reverse("runs-new"), {**FORM, "scenario": str(scenario.code), "auth_secret": "x"})
    assert refused.status_code == 200 and "needs a user" in refused.content.decode()


def test_the_migration_takes_the_clear_user_out_of_scenarios_saved_before(owner):
    project = personal_project(owner)
    target = services.get_or_create_target(project, "t", "", FORM["tls_url"])
    secrets = {"auth": {"type": "basic", "user": NAME, "secret": SECRET}}
    old = scenario_config({**FORM, "auth_user": NAME}, {}, {"arms": []}, secrets)
    old["auth_user"] = NAME  # as scenarios were saved until now
    before = Scenario.objects.create(project=project, target=target, name="before", config=old)
    unsealed = Scenario.objects.create(
        project=project, target=target, name="unsealed", config={**FORM, "auth_user": NAME}
    )

    importlib.import_module("portal.scenarios.migrations.0003_basic_auth_user_sealed_only").seal_basic_users(
        apps, None
    )

    before.refresh_from_db()
    assert "auth_user" not in before.config and NAME not in stored_text(before)
    assert vault.unseal(before.config["secrets"])["auth"]["user"] == NAME
    unsealed.refresh_from_db()  # nothing sealed holds it: kept rather than lost
    assert unsealed.config["auth_user"] == NAME
