"""Deleting, members, the switcher, the operator CLI and the migration into personal projects."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from portal.console.projects import project_for_run
from portal.projects.models import Invitation, Membership, Project, Role, personal_project
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.targets.models import SshAccess, Target
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def test_a_member_deletes_the_runs_they_started_after_confirming(client, world):
    a, member = world["a"], world["users"]["member"]
    run = make_run(member, target_name="alpha", project=a.project)
    client.force_login(member)
    page = client.post(reverse("runs-delete", args=[run.code]))
    assert page.status_code == 200 and "cannot be undone" in page.content.decode()
    assert Run.objects.filter(pk=run.pk).exists()
    client.post(reverse("runs-delete", args=[run.code]), {"confirm": "yes"})
    assert not Run.objects.filter(pk=run.pk).exists()


def test_deleting_ssh_access_erases_the_key_and_a_target_takes_its_runs(client, world):
    a = world["a"]
    client.force_login(world["users"]["owner"])
    client.post(reverse("target-ssh-delete", args=[a.target.code]), {"confirm": "yes"})
    assert not SshAccess.objects.filter(target=a.target).exists()
    body = client.get(reverse("targets-delete", args=[a.target.code])).content.decode()
    assert "Its 2 run(s) are deleted with it" in body
    client.post(reverse("targets-delete", args=[a.target.code]), {"confirm": "yes"})
    assert not Target.objects.filter(pk=a.target.pk).exists()
    assert not Run.objects.filter(project=a.project).exists() and not Scenario.objects.filter(
        project=a.project
    )
    assert world["b"].project.runs.count() == 2  # the other project is untouched


def test_running_runs_are_not_deleted(client, world):
    run = make_run(world["users"]["owner"], status=Run.Status.RUNNING, project=world["a"].project)
    client.force_login(world["users"]["owner"])
    client.post(reverse("runs-delete", args=[run.code]), {"confirm": "yes"})
    assert Run.objects.filter(pk=run.pk).exists()


def _invite(client, url: str, username: str, role: str = "viewer") -> list[str]:
    """What an owner is told after inviting ``username``, the name itself replaced."""
    page = client.post(url, {"action": "add", "username": username, "role": role}, follow=True)
    assert page.status_code == 200
    said = [str(m) for m in page.context["messages"]] + list(page.context["form"].errors.values())
    return [str(text).replace(username, "NAME") for text in said]


def test_adding_a_member_tells_nothing_about_accounts(client, world):
    """Unknown names and existing non-members get the same answer (an invitation, listed under the
    name typed); the account joins only when it accepts on its Projects page."""
    a, users = world["a"], world["users"]
    client.force_login(users["owner"])
    url = reverse("projects-members", args=[a.project.code])
    answers = [_invite(client, url, name) for name in ("outsider", "nobody99")]
    assert answers[0] == answers[1] and "If an account named NAME exists" in answers[0][0]
    listed = client.get(url).content.decode()
    assert "outsider" in listed and "nobody99" in listed  # both pending, alike
    assert not a.project.memberships.filter(user=users["outsider"]).exists()
    # Role changes and removals of non-members read alike too.
    for name in ("outsider", "nobody99"):
        page = client.post(url, {"action": "remove", "username": name, "role": "viewer"}).content.decode()
        assert f"{name} is not a member of alpha." in page
    # The invited account sees the invitation and accepts it.
    client.force_login(users["outsider"])
    listing = client.get(reverse("projects-list")).content.decode()
    assert "alpha" in listing and "Accept" in listing
    invitation = Invitation.objects.get(project=a.project, username="outsider")
    assert client.post(reverse("projects-invitation", args=[invitation.code, "accept"])).status_code == 302
    assert a.project.memberships.get(user=users["outsider"]).role == Role.VIEWER
    assert not Invitation.objects.filter(pk=invitation.pk).exists()
    # Nobody accepts another account's invitation; a declined one is gone.
    other = Invitation.objects.get(project=a.project, username="nobody99")
    assert client.post(reverse("projects-invitation", args=[other.code, "accept"])).status_code == 404
    client.force_login(users["viewer"])
    assert client.post(reverse("projects-invitation", args=[other.code, "decline"])).status_code == 404
    assert Invitation.objects.filter(pk=other.pk).exists()


def test_an_invitation_expires_and_inviting_again_renews_it(client, world, settings):
    """An invitation left unanswered past TOLLGATE_INVITATION_DAYS is neither listed to the invitee
    nor acceptable; the owner sees it as expired, and inviting again starts the time afresh."""
    a, users = world["a"], world["users"]
    settings.TOLLGATE_INVITATION_DAYS = 3
    client.force_login(users["owner"])
    url = reverse("projects-members", args=[a.project.code])
    _invite(client, url, "outsider")
    invitation = Invitation.objects.get(project=a.project, username="outsider")
    Invitation.objects.filter(pk=invitation.pk).update(created=timezone.now() - timedelta(days=3, seconds=1))
    assert "expired" in client.get(url).content.decode()
    client.force_login(users["outsider"])
    assert "alpha" not in client.get(reverse("projects-list")).content.decode()
    page = client.post(reverse("projects-invitation", args=[invitation.code, "accept"]), follow=True)
    assert "expired on" in page.content.decode() and "invite you again" in page.content.decode()
    assert not a.project.memberships.filter(user=users["outsider"]).exists()
    # Declining an expired invitation still removes it; here the owner renews it instead.
    client.force_login(users["owner"])
    _invite(client, url, "outsider", role="member")
    renewed = Invitation.objects.get(pk=invitation.pk)
    assert not renewed.expired and renewed.role == Role.MEMBER
    client.force_login(users["outsider"])
    client.post(reverse("projects-invitation", args=[invitation.code, "accept"]))
    assert a.project.memberships.get(user=users["outsider"]).role == Role.MEMBER


def test_owners_manage_members_and_the_last_owner_stays(client, world):
    a, users = world["a"], world["users"]
    client.force_login(users["owner"])
    url = reverse("projects-members", args=[a.project.code])
    client.post(url, {"action": "add", "username": "outsider", "role": "viewer"})
    client.force_login(users["outsider"])
    invitation = Invitation.objects.get(username="outsider")
    client.post(reverse("projects-invitation", args=[invitation.code, "accept"]))
    client.force_login(users["owner"])
    assert a.project.memberships.get(user=users["outsider"]).role == Role.VIEWER
    client.post(url, {"action": "role", "username": "viewer", "role": "member"})
    assert a.project.memberships.get(user=users["viewer"]).role == Role.MEMBER
    client.post(url, {"action": "remove", "username": "member", "role": "member"})
    assert not a.project.memberships.filter(user=users["member"]).exists()
    page = client.post(url, {"action": "role", "username": "owner", "role": "viewer"})
    assert "at least one owner" in page.content.decode()
    assert a.project.memberships.get(user=users["owner"]).role == Role.OWNER


def test_the_switcher_changes_the_run_list(client, world):
    a, b, users = world["a"], world["b"], world["users"]
    Membership.objects.create(project=b.project, user=users["owner"], role=Role.VIEWER)
    client.force_login(users["owner"])
    client.post(reverse("projects-switch"), {"project": str(a.project.code)})
    assert str(a.runs[0].code) in client.get(reverse("runs-list")).content.decode()
    client.post(reverse("projects-switch"), {"project": str(b.project.code)})
    body = client.get(reverse("runs-list")).content.decode()
    assert str(b.runs[0].code) in body and str(a.runs[0].code) not in body
    assert client.get(reverse("runs-new")).status_code == 403  # a viewer of B cannot start a run there


def test_cli_creates_projects_and_adds_members(world):
    users = world["users"]
    call_command("tollgate", "project", "create", "gamma", "--owner", "viewer")
    gamma = Project.objects.get(name="gamma")
    assert gamma.memberships.get(user=users["viewer"]).role == Role.OWNER
    call_command("tollgate", "project", "add-member", "gamma", "outsider", "--role", "viewer")
    assert gamma.memberships.get(user=users["outsider"]).role == Role.VIEWER
    with pytest.raises(CommandError, match="last owner"):
        call_command("tollgate", "project", "add-member", "gamma", "viewer", "--role", "member")
    with pytest.raises(CommandError, match="may not start runs"):
        project_for_run(users["outsider"], "gamma")
    assert project_for_run(users["viewer"], "gamma") == gamma
    assert project_for_run(users["outsider"], "") == personal_project(users["outsider"])


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_each_users_objects_into_a_personal_project(django_user_model):
    executor = MigrationExecutor(connection)
    before = [
        ("targets", "0004_server_process_name"),
        ("runs", "0006_arm_content_by_url"),
    ]
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    User, OldTarget, OldRun = (
        old.get_model(*m) for m in (("auth", "User"), ("targets", "Target"), ("runs", "Run"))
    )
    for name in ("ann", "bob"):
        user = User.objects.create(username=name)
        target = OldTarget.objects.create(owner=user, name=f"{name}'s", plain_url=f"http://127.0.0.1/{name}")
        OldRun.objects.create(owner=user, target=target, config={})
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    for name in ("ann", "bob"):
        project = Project.objects.get(name=name)
        assert project.personal_of.username == name
        assert project.memberships.get().role == Role.OWNER
        assert [t.name for t in project.targets.all()] == [f"{name}'s"]
        assert project.runs.get().owner.username == name


@pytest.mark.django_db
@pytest.mark.parametrize("value", ["", "not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_switching_to_a_malformed_or_unknown_project_is_404(client, world, value):
    client.force_login(world["users"]["owner"])
    assert client.post(reverse("projects-switch"), {"project": value}).status_code == 404
    assert (
        client.get(reverse("projects-members", args=["00000000-0000-0000-0000-000000000000"])).status_code
        == 404
    )
