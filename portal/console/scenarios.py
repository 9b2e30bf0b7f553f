"""``manage.py tollgate scenario create|list``: saved scenarios for CI set-up.
Errors are ``CommandError`` with one line.

``scenario create`` takes the options of ``tollgate run`` (``--name`` is the scenario's name here,
``--target-name`` the target's) plus ``--callback-url`` and ``--webhook``, validates them like the run
form (``portal.runs.starting.save_scenario``) and saves the scenario; an existing name of the project
gets a new version instead, made of these options alone (sealed secrets, budgets and callback
included: the same command gives the same scenario). ``--webhook`` also makes (or rotates) its
webhook trigger.
"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal.console import projects as project_cli
from portal.console import run_options as cli_options
from portal.console import schedules
from portal.hooks import services as hooks
from portal.lib.report import budgets, targetnames
from portal.runs import starting
from portal.scenarios import queries
from portal.scenarios.models import Scenario

ACTIONS: tuple[str, ...] = ("scenario",)
# JSON keys of save_scenario → the options that filled them, so an error names what the user typed:
# RunSpec's own options, and the ones written by hand (``--name`` is the scenario's name here).
OPTION_OF = {
    **{key: opt.cli for key, opt in cli_options.SPEC_OPTIONS.items()},
    "target_name": "--target-name",
    "paths": "--path",
    "headers": "--header",
    "auth": "--basic-auth-env/--bearer-env",
    "non_field_errors": "target",
    "tolerance_pct": "--tolerance-pct",
}


def add_arguments(sub) -> None:
    scenario = sub.add_parser("scenario", help="saved scenarios: create (or update), list, schedule")
    actions = scenario.add_subparsers(dest="scenario_action", required=True)
    create = actions.add_parser(
        "create", help="save a scenario (a new version when the name exists), optionally with a webhook"
    )
    cli_options.add_run_arguments(create)  # --name: the scenario's name
    cli_options.add_tuning_arguments(create)  # --tls-matrix, --wan-rtt
    cli_options.add_saturation_arguments(create)  # --saturation, --saturation-*
    create.add_argument("--target-name", default="", help="target name (default: from the URLs)")
    create.add_argument("--callback-url", default="", help="POSTed, signed, when a run of it ends")
    create.add_argument(
        "--tolerance-pct",
        type=float,
        default=None,
        help="regression tolerance against the pinned baseline, %% of its cost (default 10)",
    )
    create.add_argument(
        "--webhook", action="store_true", help="also make its webhook trigger (a new secret, shown once)"
    )
    listing = actions.add_parser("list", help="the scenarios of a project")
    listing.add_argument("--project", required=True)
    listing.add_argument("--json", action="store_true")
    schedules.add_scenario_arguments(actions)


def _owner(username: str):
    if username:
        return project_cli.user_named(username)
    owner = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    if owner is None:
        raise CommandError("no superuser exists: create one (manage.py createsuperuser) or pass --owner")
    return owner


def scenario_data(options: dict) -> dict:
    """The JSON keys of ``save_scenario`` for the options of ``scenario create``."""
    auth = cli_options.auth_from_env(options)
    values = cli_options.spec_values(options)  # the options of portal.lib.runs.runspec, as JSON keys
    data = {key: values[opt.form_name] for key, opt in cli_options.SPEC_OPTIONS.items()}
    if options["closed_loop"]:
        data["arrival_rate"] = None
    data.update(
        target_name=options["target_name"],
        plain_url=options["plain_url"],
        tls_url=options["tls_url"],
        paths=list(options["path"]),
        headers="\n".join(options["header"]),
        callback_url=options["callback_url"],
        tolerance_pct=10.0 if options.get("tolerance_pct") is None else options["tolerance_pct"],
        saturation=cli_options.saturation_json(options, data["arms"]),
    )
    # The whole scenario: no auth option means no credentials, no --budget no budgets.
    data["auth"] = {
        "type": auth["auth_type"],
        "user": auth.get("auth_user", ""),
        "secret": auth.get("auth_secret", ""),
    }
    data["budgets"] = _budgets(options["budget"])
    return data


def _budgets(items: list[str]) -> dict:
    try:
        return budgets.parse(items)
    except budgets.BudgetError as exc:
        raise CommandError(f"--budget: {exc}") from None


def scenario_name(options: dict) -> str:
    """``--name``, else the target's name (``--target-name``, else the one the run form gives the URLs,
    ``127.0.0.1:8443/1k``): the command as docs/ci.md and the issue spell it has no ``--name``, and
    running it again makes a new version of the same scenario."""
    name = options["name"] or options["target_name"]
    if not name and (options["plain_url"] or options["tls_url"]):
        name = targetnames.default_name(options["plain_url"] or None, options["tls_url"] or None)
    if not name:
        raise CommandError("--name: the scenario needs a name (or --plain-url/--tls-url to name it by)")
    return name[:200]  # Scenario.name's length


def create(options: dict) -> dict:
    options = {**options, "name": scenario_name(options)}
    if not options["project"]:
        raise CommandError("--project: name the project the scenario belongs to")
    owner = _owner(options["owner"])
    project = project_cli.project_for_run(owner, options["project"])
    data = scenario_data(options)
    # One transaction: a webhook that cannot be made leaves no scenario (or version) behind.
    with transaction.atomic():
        existing = Scenario.objects.filter(project=project, name=options["name"]).first()
        try:
            scenario = starting.save_scenario(project, options["name"], data, scenario=existing, replace=True)
        except starting.RunRefused as exc:
            problems = "; ".join(
                f"{OPTION_OF.get(k, '--' + k.replace('_', '-'))}: {' '.join(v)}"
                for k, v in exc.errors.items()
            )
            raise CommandError(f"invalid options: {problems}") from None
        out = {"id": str(scenario.code), "version": scenario.version}
        if options["webhook"]:
            trigger, secret = hooks.create_trigger(scenario, owner)
            out.update(webhook_url=hooks.webhook_url(trigger), webhook_secret=secret)
    return out


def listing(options: dict) -> list[dict]:
    project = project_cli.project_named(options["project"])
    scenarios = list(project.scenarios.select_related("target").order_by("name"))
    last = queries.last_runs([scenario.pk for scenario in scenarios])
    rows = []
    for scenario in scenarios:
        run = last.get(scenario.pk)
        rows.append(
            {
                "id": str(scenario.code),
                "name": scenario.name,
                "target": {
                    "name": scenario.target.name,
                    "plain_url": scenario.target.plain_url,
                    "tls_url": scenario.target.tls_url,
                },
                "version": scenario.version,
                "budgets": scenario.budgets or {},
                "callback_url": scenario.callback_url or None,
                "tolerance_pct": scenario.tolerance_pct,
                "last_run": None
                if run is None
                else {
                    "id": str(run.code),
                    "status": run.status,
                    "scenario_version": run.scenario_version,
                    "budgets": ((run.summary or {}).get("budgets") or {}).get("status"),
                },
            }
        )
    return rows


def handle(command: BaseCommand, options: dict) -> None:
    if options["scenario_action"] in schedules.SCENARIO_ACTIONS:
        schedules.handle_scenario(command, options)
        return
    if options["scenario_action"] == "create":
        out = create(options)
        if options["json"]:
            command.stdout.write(json.dumps(out, indent=2))
        else:
            command.stdout.write(f"scenario {out['id']} version {out['version']}")
            if "webhook_url" in out:
                command.stdout.write(
                    f"webhook: {out['webhook_url']}\nsecret (shown once): {out['webhook_secret']}"
                )
        return
    rows = listing(options)
    if options["json"]:
        command.stdout.write(json.dumps(rows, indent=2))
        return
    for row in rows:
        limits = ", ".join(f"{k}={v}" for k, v in row["budgets"].items()) or "no budgets"
        last = row["last_run"]["status"] if row["last_run"] else "never run"
        command.stdout.write(
            f"{row['id']}  v{row['version']}  {row['name']}  ({row['target']['name']}; {limits}; {last})"
        )
