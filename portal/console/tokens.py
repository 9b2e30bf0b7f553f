"""``tollgate token create|revoke|list``: API tokens from the command line (CI set-up, operators).
Errors are ``CommandError`` with one line."""

from __future__ import annotations

import json
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError

from portal.api import tokens
from portal.api.models import ApiToken
from portal.console.projects import project_named, user_named
from portal.projects.access import can, role_in
from portal.projects.models import Role

ACTIONS: tuple[str, ...] = ("token",)


def add_arguments(sub) -> None:
    token = sub.add_parser("token", help="API tokens: create (shown once), revoke, list")
    actions = token.add_subparsers(dest="token_action", required=True)
    create = actions.add_parser("create", help="a new token of USER in PROJECT (printed once)")
    create.add_argument("--user", required=True, help="username the token acts as")
    create.add_argument("--project", required=True, help="project name (the user must be a member)")
    create.add_argument("--scope", choices=ApiToken.Scope.values, default=ApiToken.Scope.READ)
    create.add_argument("--name", required=True, help="what uses it, e.g. ci")
    create.add_argument(
        "--json", action="store_true", help='print {"token", "id", "name", "scope", "project"}'
    )
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("id", help="the token's id (tollgate token list)")
    listing = actions.add_parser("list", help="tokens (never their values), newest first")
    listing.add_argument("--user", default="", help="only this user's tokens")
    listing.add_argument("--json", action="store_true")


def _create(command: BaseCommand, options: dict) -> None:
    user, project = user_named(options["user"]), project_named(options["project"])
    role = role_in(user, project)
    if role is None:
        raise CommandError(f"{user.username} is not a member of {project.name}")
    if options["scope"] == ApiToken.Scope.RUN and not can(role, Role.MEMBER):
        raise CommandError(f"{user.username} is {role} of {project.name}: a run token needs member or owner")
    name = options["name"].strip()
    if not name or len(name) > 100:
        raise CommandError("--name: 1 to 100 characters")
    token, plaintext = tokens.issue(user, project, scope=options["scope"], name=name)
    if options["json"]:
        out = {"token": plaintext, "id": str(token.code), "name": name, "scope": token.scope}
        command.stdout.write(json.dumps({**out, "project": project.name}))
        return
    command.stdout.write(plaintext)
    command.stderr.write(
        f"Token {name} ({token.scope}) of {user.username} in {project.name}, id {token.code}. "
        "It is shown only this once: store it now (Tollgate keeps only its digest)."
    )


def _revoke(command: BaseCommand, options: dict) -> None:
    try:
        token = ApiToken.objects.get(code=UUID(options["id"]))
    except (ValueError, ApiToken.DoesNotExist):
        raise CommandError(f"no token with id {options['id']!r}") from None
    if tokens.revoke(token, actor_name="cli"):
        command.stdout.write(f"token {token.name} ({token.prefix}…) revoked")
    else:
        command.stdout.write(f"token {token.name} ({token.prefix}…) was revoked already")


def _list(command: BaseCommand, options: dict) -> None:
    found = ApiToken.objects.select_related("user", "project").order_by("-created")
    if options["user"]:
        found = found.filter(user=user_named(options["user"]))
    rows = [
        {
            "id": str(t.code),
            "name": t.name,
            "user": t.user.username,
            "project": t.project.name,
            "scope": t.scope,
            "prefix": t.prefix,
            "created": t.created.isoformat(),
            "last_used": t.last_used.isoformat() if t.last_used else None,
            "revoked_at": t.revoked_at.isoformat() if t.revoked_at else None,
        }
        for t in found
    ]
    if options["json"]:
        command.stdout.write(json.dumps(rows, indent=2))
        return
    for r in rows:
        state = f"revoked {r['revoked_at'][:16]}" if r["revoked_at"] else "active"
        used = (r["last_used"] or "never")[:16]
        command.stdout.write(
            f"{r['id']}  {r['prefix']}…  {r['scope']:4}  {r['user']}@{r['project']}  {r['name']}  "
            f"created {r['created'][:16]}  last used {used}  {state}"
        )


def handle(command: BaseCommand, options: dict) -> None:
    {"create": _create, "revoke": _revoke, "list": _list}[options["token_action"]](command, options)
