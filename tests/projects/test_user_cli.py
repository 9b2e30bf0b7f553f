"""``tollgate user create``: an ordinary account made by an operator logs in (even where e-mail
addresses must be confirmed), gets its personal project, and bad input creates nothing."""

from __future__ import annotations

import io
import sys

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from portal.audit.models import AuditEvent
from portal.projects.models import Project

pytestmark = pytest.mark.django_db

PASSWORD = "a long passphrase 2024"  # noqa: S105 - a test account's


def create(monkeypatch, *args: str, stdin: str = PASSWORD + "\n") -> str:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("tollgate", "user", "create", *args, stdout=out)
    return out.getvalue()


@override_settings(ACCOUNT_EMAIL_VERIFICATION="mandatory")
def test_the_account_logs_in_at_once_and_has_its_personal_project(client, monkeypatch):
    said = create(monkeypatch, "alice", "--email", "alice@example.test", "--password-stdin")
    assert said.strip() == "user alice created (alice@example.test), personal project alice"
    user = get_user_model().objects.get(username="alice")
    assert not user.is_staff and not user.is_superuser and user.is_active
    address = EmailAddress.objects.get(user=user)
    assert (address.email, address.primary, address.verified) == ("alice@example.test", True, True)
    assert Project.objects.get(personal_of=user).name == "alice"
    assert AuditEvent.objects.filter(kind="signup", actor=user, detail__via="cli").count() == 1
    # No confirmation mail stands between the operator's account and its first login.
    answer = client.post("/accounts/login/", {"login": "alice", "password": PASSWORD})
    assert answer.status_code == 302 and answer["Location"] == "/runs/"
    assert "_auth_user_id" in client.session


@pytest.mark.parametrize(
    ("args", "stdin", "error"),
    [
        (["bob", "--email", "bob@example.test"], "", "no password on stdin"),
        (["bob", "--email", "bob@example.test"], "\n", "no password on stdin"),
        (["bob", "--email", "bob@example.test"], "short\n", "password: This password is too short"),
        (["bob", "--email", "bob@example.test"], "password123\n", "This password is too common"),
        (["bob", "--email", "not-an-address"], PASSWORD, "--email: Enter a valid email address."),
        (["bo b", "--email", "bob@example.test"], PASSWORD, "username: Enter a valid username."),
        (["ALICE", "--email", "bob@example.test"], PASSWORD, "an account named 'ALICE' exists already"),
        (["bob", "--email", "Alice@Example.test"], PASSWORD, "the address Alice@example.test exists already"),
    ],
)
def test_bad_input_is_refused_with_the_reason_and_creates_nothing(monkeypatch, args, stdin, error):
    create(monkeypatch, "alice", "--email", "alice@example.test", "--password-stdin")
    users, projects = get_user_model().objects.count(), Project.objects.count()
    with pytest.raises(CommandError, match=error):
        create(monkeypatch, *args, "--password-stdin", stdin=stdin)
    assert get_user_model().objects.count() == users and Project.objects.count() == projects


def test_the_password_is_never_taken_from_the_command_line(monkeypatch):
    with pytest.raises(CommandError, match="--password-stdin"):
        create(monkeypatch, "carol", "--email", "carol@example.test")
    assert not get_user_model().objects.filter(username="carol").exists()
