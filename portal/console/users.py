"""``tollgate user create``: an ordinary account from the command line (operators, set-up scripts),
with its personal project. The password comes on stdin, never in argv (``ps``, shell history); the
operator vouches for the e-mail address, so it is stored verified and the account can log in under
``TOLLGATE_EMAIL_VERIFICATION=mandatory`` without a mail server. Errors are ``CommandError`` with
one line."""

from __future__ import annotations

import sys

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email
from django.db import transaction

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.projects.models import personal_project

ACTIONS: tuple[str, ...] = ("user",)


def add_arguments(sub) -> None:
    user = sub.add_parser("user", help="create ordinary accounts (operators)")
    actions = user.add_subparsers(dest="user_action", required=True)
    create = actions.add_parser("create", help="a new account and its personal project")
    create.add_argument("username")
    create.add_argument("--email", required=True, help="the account's address (stored as verified)")
    create.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the password from the first line of stdin (never from argv)",
    )


def _password(user) -> str:
    line = sys.stdin.readline()
    password = line[:-1] if line.endswith("\n") else line
    if not password:
        raise CommandError("--password-stdin: no password on stdin (its first line is the password)")
    try:
        validate_password(password, user)
    except ValidationError as exc:
        raise CommandError("password: " + " ".join(exc.messages)) from None
    return password


def _create(command: BaseCommand, options: dict) -> None:
    users = get_user_model()
    user = users(username=options["username"].strip(), email=options["email"].strip())
    try:
        validate_email(user.email)
    except ValidationError as exc:
        raise CommandError(f"--email: {' '.join(exc.messages)}") from None
    try:
        user.full_clean(exclude=["password", "email"])
    except ValidationError as exc:
        raise CommandError(" ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
    # Logins match names and addresses case-insensitively: Alice beside alice would be ambiguous.
    if users.objects.filter(username__iexact=user.username).exists():
        raise CommandError(f"an account named {user.username!r} exists already")
    if (
        users.objects.filter(email__iexact=user.email).exists()
        or EmailAddress.objects.filter(email__iexact=user.email).exists()
    ):
        raise CommandError(f"an account with the address {user.email} exists already")
    user.set_password(_password(user))
    with transaction.atomic():
        user.save()
        EmailAddress.objects.create(user=user, email=user.email, primary=True, verified=True)
        project = personal_project(user)
        audit.record(None, AuditEvent.Kind.SIGNUP, actor=user, via="cli")
    command.stdout.write(f"user {user.username} created ({user.email}), personal project {project.name}")


def handle(command: BaseCommand, options: dict) -> None:
    {"create": _create}[options["user_action"]](command, options)
