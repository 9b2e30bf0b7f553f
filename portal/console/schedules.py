"""``tollgate scenario schedule ID (--cron EXPR | --off) [--tz ZONE] [--user U] [--json]``: a saved
scenario's schedule from the command line. A sub-command of ``tollgate scenario``
(``portal.console.scenarios``); the same service as the page and the API
(``portal.schedules.services``). ``--json`` prints ``{"scenario", "cron", "time_zone", "enabled",
"next_run_at"}``.
"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.console.projects import user_named
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.scenarios.models import Scenario
from portal.schedules import services
from portal.schedules.models import Schedule

SCENARIO_ACTIONS: tuple[str, ...] = ("schedule",)


def add_scenario_arguments(actions) -> None:
    schedule = actions.add_parser("schedule", help="run a saved scenario on a schedule (or show, or stop it)")
    schedule.add_argument("scenario", metavar="ID", help="the scenario's id (its UUID, as in its URL)")
    when = schedule.add_mutually_exclusive_group()
    when.add_argument(
        "--cron", default="", help="five cron fields, e.g. '0 2 * * *', or 'daily at 02:00'; none: show it"
    )
    when.add_argument("--off", action="store_true", help="remove the schedule")
    schedule.add_argument("--tz", default="", help="IANA time zone the cron is read in (default: UTC)")
    schedule.add_argument("--disabled", action="store_true", help="keep the schedule but do not fire it")
    schedule.add_argument("--user", default="", help="the runs belong to this member (default: a superuser)")
    schedule.add_argument("--json", action="store_true", help="print the schedule as JSON")


def _user(username: str):
    if username:
        return user_named(username)
    user = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if user is None:
        raise CommandError("no superuser exists: pass --user (a member of the scenario's project)")
    return user


def _scenario(code: str, user, needed: str) -> Scenario:
    """The scenario; to anyone but a superuser, another project's is a made-up id. Saving a
    schedule is then judged by ``services.set_schedule`` (the page's and the API's check)."""
    try:
        scenario = Scenario.objects.select_related("project").get(code=code)
    except (Scenario.DoesNotExist, ValidationError):
        raise CommandError(f"no scenario with id {code!r}") from None
    role = role_in(user, scenario.project)
    if not user.is_superuser and not can(role, needed):
        raise CommandError(
            f"{user.get_username()} may not change schedules in {scenario.project.name} (needs member)"
            if role
            else f"no scenario with id {code!r}"
        )
    return scenario


def handle_scenario(command: BaseCommand, options: dict) -> None:
    user = _user(options["user"])
    # Showing the schedule is reading (viewers too); removing it needs the member role; saving one
    # needs a user who may start runs in the project (its runs are theirs): set_schedule decides.
    scenario = _scenario(options["scenario"], user, Role.MEMBER if options["off"] else Role.VIEWER)
    if options["off"]:
        services.clear_schedule(scenario)
    elif options["cron"]:
        try:
            services.set_schedule(
                scenario, user, options["cron"], options["tz"] or None, enabled=not options["disabled"]
            )
        except services.ScheduleRefused as exc:
            default = f"; {user.get_username()} is the default (the first superuser): pass --user"
            raise CommandError(f"{exc}{'' if options['user'] else default}") from None
        except services.ScheduleError as exc:
            raise CommandError(f"--cron/--tz: {exc}") from None
    elif options["tz"] or options["disabled"]:
        raise CommandError("--tz and --disabled go with --cron")
    out = services.describe(Schedule.objects.filter(scenario=scenario).first(), scenario)
    if options["json"]:
        command.stdout.write(json.dumps(out, indent=2))
    elif out["cron"] is None:
        command.stdout.write(f"scenario {out['scenario']}: no schedule")
    else:
        state = f"next run at {out['next_run_at']}" if out["enabled"] else "disabled"
        command.stdout.write(f"scenario {out['scenario']}: {out['cron']} ({out['time_zone']}), {state}")
