"""The four HTTP/3 arms on the run form (a checkbox each, with its label) and on the CLI (``--arms``,
``scenario create``): every surface goes through RunSpec, so each takes them by name (issue 34,
item 6; the API's and the webhook's tests are in tests/api/test_h3_arms.py and tests/hooks)."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from portal.lib.runs import runspec
from portal.projects.models import Membership, Project, Role, personal_project
from portal.runs.forms import RunForm
from portal.scenarios.models import Scenario

H3 = ("h3", "h3_new", "h3_resumed", "h3_0rtt")


def test_runspec_declares_each_http3_arm_with_a_label_saying_quic():
    assert set(H3) <= set(runspec.ARM_NAMES)
    for name in H3:
        assert runspec.ARM_LABELS[name].startswith(f"{name} — HTTP/3")
    assert "0-RTT" in runspec.ARM_LABELS["h3_0rtt"] and "QUIC" in runspec.ARM_LABELS["h3"]


@pytest.mark.django_db
def test_the_run_form_offers_a_labelled_checkbox_per_http3_arm_and_takes_them(owner):
    form = RunForm(project=personal_project(owner))
    choices = dict(form.fields["arms"].choices)
    for name in H3:
        assert choices[name] == runspec.ARM_LABELS[name]
    html = str(form["arms"])
    assert all(f'value="{name}"' in html for name in H3)
    data = {
        "plain_url": "http://127.0.0.1:9/",
        "tls_url": "https://127.0.0.1:9/",
        "arms": ["tls", "h2", *H3],
        "users": 1,
        "spawn_rate": 1,
        "warmup_s": 0,
        "duration_s": 1,
        "rounds": 1,
        "follow_redirects": "on",
        "auth_type": "none",
    }
    bound = RunForm(data, project=personal_project(owner))
    assert bound.is_valid(), bound.errors
    assert list(bound.cleaned_data["arms"]) == ["tls", "h2", *H3]


@pytest.mark.django_db
def test_scenario_create_on_the_cli_takes_the_http3_arms_and_refuses_a_misspelt_one(owner):
    project = Project.objects.create(name="team")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    base = ["tollgate", "scenario", "create", "--project", "team", "--owner", "owner", "--name", "quic"]
    base += ["--tls-url", "https://127.0.0.1:9/1k", "--duration", "2", "--insecure"]
    call_command(*base, "--arms", "tls,h3,h3_new,h3_resumed,h3_0rtt", stdout=io.StringIO())
    scenario = Scenario.objects.get(name="quic")
    config = scenario.config if hasattr(scenario, "config") else scenario.current.config
    assert [arm["name"] if isinstance(arm, dict) else arm for arm in config["arms"]] == ["tls", *H3]
    with pytest.raises(CommandError, match="h3_early"):
        call_command(*base, "--name", "bad", "--arms", "tls,h3_early", stdout=io.StringIO())
