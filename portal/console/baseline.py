"""``tollgate baseline pin|unpin RUN_ID [--user U]``: a target's baseline from the command line (the
run compares start from). Pinning is refused, exit 1 with the reason on stderr, for a run that cannot
be one (``portal.runs.services.baseline_refusal``, the check behind the run page's button and the
API). ``--user`` acts as that user, who must be a member or owner of the run's project; without it,
as the operator."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.console.projects import user_named
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.runs import services
from portal.runs.models import Run

ACTIONS: tuple[str, ...] = ("baseline",)


def add_arguments(sub) -> None:
    baseline = sub.add_parser("baseline", help="pin or unpin a run as its target's baseline")
    actions = baseline.add_subparsers(dest="baseline_action", required=True)
    for action, what in (("pin", "make the run its target's baseline"), ("unpin", "unpin it")):
        parser = actions.add_parser(action, help=what)
        parser.add_argument("run", metavar="RUN_ID", help="the run's id (its UUID, as in its URL)")
        parser.add_argument("--user", default="", help="act as this user (member or owner of the project)")


def _run(code: str) -> Run:
    try:
        return Run.objects.select_related("target", "project").get(code=code)
    except (Run.DoesNotExist, ValidationError):
        raise CommandError(f"no run with id {code!r}") from None


def handle(command: BaseCommand, options: dict) -> None:
    run = _run(options["run"])
    if options["user"]:
        user = user_named(options["user"])
        role = role_in(user, run.project)
        if role is None or not can(role, Role.MEMBER):
            # Not a member is "no such run", as on the page: a run id says nothing to outsiders.
            raise CommandError(
                f"{user.username} may not pin baselines in {run.project.name} (needs member or owner)"
                if role
                else f"no run with id {options['run']!r}"
            )
    target = run.target
    if options["baseline_action"] == "unpin":
        done = services.unpin_baseline(run)
        command.stdout.write(f"run {run.code} unpinned" if done else f"run {run.code} was not the baseline")
        return
    try:
        services.pin_baseline(run)
    except services.NotABaseline as exc:
        raise CommandError(str(exc)) from None
    command.stdout.write(f"run {run.code} is the baseline of {target.name}")
