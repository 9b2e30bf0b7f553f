"""``tollgate project create|add-member``: the operator's side of projects (errors are
``CommandError`` with one line for the operator); and the user and project lookups every sub-command
of the console names them by."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from portal.projects.models import Membership, Project, Role, personal_project

ACTIONS: tuple[str, ...] = ("project",)


def add_arguments(sub) -> None:
    project = sub.add_parser("project", help="create projects and add members (operators)")
    actions = project.add_subparsers(dest="project_action", required=True)
    create: CommandParser = actions.add_parser("create", help="a new project with its first owner")
    create.add_argument("name")
    create.add_argument("--owner", required=True, help="username of the project's first owner")
    add = actions.add_parser("add-member", help="add a user to a project, or change their role")
    add.add_argument("name")
    add.add_argument("username")
    add.add_argument("--role", choices=Role.values, default=Role.MEMBER)


def user_named(username: str):
    users = get_user_model().objects
    try:
        return users.get(username=username)
    except users.model.DoesNotExist:
        raise CommandError(f"no user named {username!r}") from None


def project_named(name: str) -> Project:
    try:
        return Project.objects.get(name=name)
    except Project.DoesNotExist:
        raise CommandError(f"no project named {name!r}") from None


def handle(command: BaseCommand, options: dict) -> None:
    command.stdout.write(_changed(options))


def _changed(options: dict) -> str:
    if options["project_action"] == "create":
        owner = user_named(options["owner"])
        name = options["name"].strip()
        if not name or Project.objects.filter(name=name).exists():
            raise CommandError(
                f"a project named {name!r} exists already" if name else "a project needs a name"
            )
        with transaction.atomic():
            project = Project.objects.create(name=name)
            Membership.objects.create(project=project, user=owner, role=Role.OWNER)
        return f"project {project.name} created, owner {owner.username}"
    project, user = project_named(options["name"]), user_named(options["username"])
    role = options["role"]
    found = project.memberships.filter(user=user).first()
    others = project.memberships.filter(role=Role.OWNER).exclude(user=user)
    if found and found.role == Role.OWNER and role != Role.OWNER and not others.exists():
        raise CommandError(f"{user.username} is the last owner of {project.name}: add another owner first")
    Membership.objects.update_or_create(project=project, user=user, defaults={"role": role})
    return f"{user.username} is {role} of {project.name}"


def project_for_run(owner, name: str) -> Project:
    """``tollgate run --project NAME``: the named project (the run's user must be a member who may
    start runs there), or the user's personal project."""
    if not name:
        return personal_project(owner)
    project = project_named(name)
    role = project.memberships.filter(user=owner).values_list("role", flat=True).first()
    if role not in (Role.MEMBER, Role.OWNER):
        raise CommandError(f"{owner.username} may not start runs in {project.name} (needs member or owner)")
    return project
