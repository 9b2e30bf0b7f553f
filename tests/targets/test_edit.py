"""Correcting a target in place: a typo in a URL is fixed on the target (its runs, trend and
scenarios stay together) instead of a run making a new target; who may do it; what it may not do
(collide with another target, strand a scenario, skip verification, carry saved secrets to a new
address); and the run form saying whether a run joins a target or makes one."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership, Project, Role
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.runs.starting import save_scenario, scenario_form_data
from portal.scenarios.models import Scenario
from portal.scenarios.secrets import SavedSecrets, origin
from portal.targets.models import Target
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

TYPO = {"plain_url": "http://127.0.0.1:8081/1kk", "tls_url": "https://127.0.0.1:8443/1kk"}
FIXED = {"plain_url": "http://127.0.0.1:8081/1k", "tls_url": "https://127.0.0.1:8443/1k"}
RUN_FORM = {
    **FIXED,
    "arms": ["plain", "tls"],
    "users": "2",
    "spawn_rate": "2",
    "warmup_s": "1",
    "duration_s": "3",
}


@pytest.fixture
def team(django_user_model):
    """Project "shop" with a target whose URLs carry a typo, one run on it and a saved scenario; its
    owner, a member, a viewer, and an outsider with a project of their own."""
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider")
    }
    project = Project.objects.create(name="shop")
    for role in ("owner", "member", "viewer"):
        Membership.objects.create(project=project, user=users[role], role=role)
    Membership.objects.create(
        project=Project.objects.create(name="other"), user=users["outsider"], role=Role.OWNER
    )
    scenario = save_scenario(
        project,
        "nightly",
        {**TYPO, "arms": ["plain", "tls"], "headers": {"X-Key": "k1"}, "headers_over_http": True},
    )
    target = scenario.target
    run = make_run(users["owner"], project=project)
    Run.objects.filter(pk=run.pk).update(target=target)
    Target.objects.exclude(pk=target.pk).delete()  # the factory's own
    return {"users": users, "project": project, "target": target, "scenario": scenario, "run": run}


def login(client, user, project) -> None:
    """Logged in with ``project`` as the current one (the outsider tries it too)."""
    client.force_login(user)
    session = client.session
    session[SESSION_KEY] = str(project.code)
    session.save()


def edit(client, user, target, **data):
    login(client, user, target.project)
    return client.post(reverse("targets-edit", args=[target.code]), {"name": target.name, **data})


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 302), ("member", 302), ("viewer", 403), ("outsider", 404)]
)
def test_owners_and_members_correct_a_target_viewers_and_outsiders_cannot(client, team, role, status):
    target = team["target"]
    response = edit(client, team["users"][role], target, name="shop front", **FIXED)
    assert response.status_code == status
    target.refresh_from_db()
    changed = (target.name, target.plain_url, target.tls_url) == (
        "shop front",
        FIXED["plain_url"],
        FIXED["tls_url"],
    )
    assert changed == (status == 302)
    page = client.get(reverse("targets-edit", args=[target.code]))
    assert page.status_code == (200 if status == 302 else status)
    listed = client.get(reverse("targets-list")).content.decode()
    assert (reverse("targets-edit", args=[target.code]) in listed) == (status == 302)


def test_a_typo_fixed_on_the_target_keeps_runs_and_scenarios_together(client, team):
    target, scenario, run = team["target"], team["scenario"], team["run"]
    measured = dict(Run.objects.get(pk=run.pk).config)
    response = edit(client, team["users"]["member"], target, **FIXED)
    assert response.status_code == 302 and response["Location"] == reverse("targets-list")
    said = [str(m) for m in response.wsgi_request._messages]
    assert said and "its runs keep the URLs they measured" in said[0] and "nightly" in said[0]
    target.refresh_from_db()
    assert (target.plain_url, target.tls_url) == (FIXED["plain_url"], FIXED["tls_url"])
    assert target.name == "127.0.0.1:8443/1k"  # named after its URL, it follows the correction
    # The run keeps what it measured; the scenario takes the new URLs as its next version.
    assert Run.objects.get(pk=run.pk).config == measured and Run.objects.get(pk=run.pk).target == target
    scenario.refresh_from_db()
    assert scenario.version == 2 and scenario.target == target
    assert (scenario.config["plain_url"], scenario.config["tls_url"]) == (
        FIXED["plain_url"],
        FIXED["tls_url"],
    )
    # Same origins: the saved header still goes with the scenario's runs, to the same address.
    form = RunForm(scenario_form_data(scenario), saved=SavedSecrets.of(scenario), project=team["project"])
    assert form.is_valid(), form.errors
    assert form.secrets() == {"headers": {"X-Key": "k1"}} and {
        a["url"] for a in form.engine_config()["arms"]
    } == set(FIXED.values())
    # A run with the corrected URLs joins the target: no second target.
    client.post(reverse("runs-new"), RUN_FORM)
    assert (
        Run.objects.latest("pk").target == target
        and Target.objects.filter(project=team["project"]).count() == 1
    )
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TARGET_CHANGED)
    assert (
        event.detail["before"]["plain_url"] == TYPO["plain_url"]
        and event.detail["after"]["plain_url"] == FIXED["plain_url"]
    )
    assert event.detail["scenarios"] == ["nightly"] and event.detail["verification_reset"] == []


def test_a_new_address_is_verified_again_before_any_run(client, team, settings):
    settings.TOLLGATE_VERIFY_NETWORKS = ["127.0.0.64/26"]
    target = team["target"]
    Target.objects.filter(pk=target.pk).update(plain_url="", tls_url="https://127.0.0.65:8443/1kk")
    Scenario.objects.filter(pk=team["scenario"].pk).delete()
    Target.objects.filter(pk=target.pk).update(verified_at=timezone.now(), verified_by_method="file")
    member = team["users"]["member"]
    # The path only: the origin was verified, it stays so.
    assert edit(client, member, target, tls_url="https://127.0.0.65:8443/1k").status_code == 302
    target.refresh_from_db()
    assert target.verified_at is not None
    # Another host: never verified, so the verification is reset and the form refuses to run.
    response = edit(client, member, target, tls_url="https://127.0.0.66:8443/1k")
    assert response["Location"] == reverse("target-verification", args=[target.code])
    target.refresh_from_db()
    assert target.verified_at is None and target.verified_by_method == ""
    assert "verify the target again" in str(list(response.wsgi_request._messages)[-1])
    form = RunForm(
        {**RUN_FORM, "plain_url": "", "tls_url": target.tls_url, "arms": ["tls"]}, project=team["project"]
    )
    assert not form.is_valid() and "is not verified" in str(form.non_field_errors())


def test_saved_secrets_never_follow_a_scenario_to_a_new_address(client, team):
    scenario = team["scenario"]
    # Saved before secret origins were recorded: the origins were read from its own URLs.
    scenario.config = {k: v for k, v in scenario.config.items() if k != "secret_origins"}
    scenario.save()
    moved = {"plain_url": "http://127.0.0.2:8081/1k", "tls_url": "https://127.0.0.2:8443/1k"}
    response = edit(client, team["users"]["owner"], team["target"], **moved)
    assert "type them again on the next run of nightly" in str(list(response.wsgi_request._messages)[0])
    scenario.refresh_from_db()
    assert scenario.config["secret_origins"] == sorted(origin(url) for url in TYPO.values())
    form = RunForm(scenario_form_data(scenario), saved=SavedSecrets.of(scenario), project=team["project"])
    assert not form.is_valid() and "enter them again for" in " ".join(form.errors["headers"])


def test_an_edit_never_takes_another_targets_urls_nor_strands_a_scenario(client, team):
    target = team["target"]
    other = Target.objects.create(project=team["project"], name="shop (fixed)", **FIXED)
    response = edit(client, team["users"]["owner"], target, **FIXED)
    assert response.status_code == 200
    assert "Target shop (fixed) already has these URLs" in response.content.decode()
    response = edit(client, team["users"]["owner"], target, plain_url=TYPO["plain_url"], tls_url="")
    assert response.status_code == 200
    assert "The scenario nightly runs the arm(s) tls: it needs a URL." in response.content.decode()
    target.refresh_from_db()
    assert (target.plain_url, target.tls_url) == (
        TYPO["plain_url"],
        TYPO["tls_url"],
    ) and other.runs.count() == 0
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.TARGET_CHANGED).exists()


def test_the_run_form_says_whether_a_run_joins_a_target_or_makes_one(client, team):
    login(client, team["users"]["member"], team["project"])
    edit_url = reverse("targets-edit", args=[team["target"].code])

    def note(**data) -> str:
        body = client.post(reverse("runs-new"), {**RUN_FORM, "users": "0", **data}).content.decode()
        return re.sub(
            r"\s+", " ", re.search(r'<p class="note" id="target-note"[^>]*>(.*?)</p>', body, re.S).group(1)
        )

    joins = note(**TYPO)
    assert "the target <strong>127.0.0.1:8443/1kk</strong>: the run joins it" in joins
    fixed = note(**FIXED)  # the typo's origin: the target meant is the one to edit
    assert "makes a <strong>new target</strong>" in fixed and f'<a href="{edit_url}">' in fixed
    elsewhere = note(plain_url="http://127.0.0.3/", tls_url="https://127.0.0.3/")
    assert "new target" in elsewhere and edit_url not in elsewhere and "Targets</a> page" in elsewhere
    assert Run.objects.count() == 1  # users=0: nothing started
    # A project without targets: nothing to edit instead.
    login(client, team["users"]["outsider"], Project.objects.get(name="other"))
    first = note(**FIXED)
    assert "new target</strong>." in first and "To correct" not in first
