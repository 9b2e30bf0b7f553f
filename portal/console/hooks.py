"""``tollgate webhook create|rotate|deliveries``: set up a scenario's webhook for a CI.
Errors are ``CommandError`` with one line."""

from __future__ import annotations

import json
import uuid

from django.core.management.base import BaseCommand, CommandError

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.console.projects import user_named
from portal.hooks import services
from portal.hooks.models import WebhookDelivery, WebhookTrigger
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.scenarios.models import Scenario

ACTIONS: tuple[str, ...] = ("webhook",)


def add_arguments(sub) -> None:
    """Add this app's sub-parsers to ``sub`` (argparse sub-parsers of ``tollgate``)."""
    webhook = sub.add_parser("webhook", help="a scenario's signed webhook trigger (docs/ci.md)")
    actions = webhook.add_subparsers(dest="webhook_action", required=True)
    create = actions.add_parser("create", help="create it (or rotate the secret of the existing one)")
    create.add_argument("--github", action="store_true", help="accept GitHub's format (X-Hub-Signature-256)")
    create.add_argument(
        "--user", default="", help="who the runs it starts belong to (default: the project's first owner)"
    )
    rotate = actions.add_parser("rotate", help="a new secret; the old one verifies for the grace period")
    deliveries = actions.add_parser("deliveries", help="the last deliveries and what they were answered")
    deliveries.add_argument("--limit", type=int, default=20)
    for parser in (create, rotate, deliveries):
        parser.add_argument("--scenario", required=True, help="the scenario's id (a UUID)")
        parser.add_argument("--json", action="store_true", help="print JSON")


def scenario_by_id(value: str) -> Scenario:
    try:
        return Scenario.objects.select_related("project").get(code=uuid.UUID(value))
    except (ValueError, Scenario.DoesNotExist):
        raise CommandError(f"no scenario with id {value!r}") from None


def creator(scenario: Scenario, username: str):
    """The user runs will belong to: named, or the project's first owner; a member at least."""
    if username:
        user = user_named(username)
    else:
        first = scenario.project.memberships.filter(role=Role.OWNER).select_related("user").order_by("pk")
        user = first.first().user if first.exists() else None
        if user is None:
            raise CommandError(f"project {scenario.project.name} has no owner: pass --user")
    if not can(role_in(user, scenario.project), Role.MEMBER):
        raise CommandError(f"{user.username} may not start runs in {scenario.project.name} (needs member)")
    return user


def _secret_out(command: BaseCommand, options: dict, trigger: WebhookTrigger, secret: str, action: str):
    audit.record(
        None,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        actor_name="cli",
        credential="webhook secret",
        action=action,
        scenario=str(trigger.scenario.code),
        project_id=trigger.scenario.project_id,
    )
    data = {"webhook_url": services.webhook_url(trigger), "webhook_secret": secret, "format": trigger.format}
    if options["json"]:
        command.stdout.write(json.dumps(data, indent=2))
    else:
        command.stdout.write(f"webhook URL: {data['webhook_url']}\nsecret (shown once): {secret}")


def _deliveries(command: BaseCommand, options: dict, trigger: WebhookTrigger | None) -> None:
    rows = WebhookDelivery.objects.filter(trigger=trigger).select_related("run")[: max(1, options["limit"])]
    data = [
        {
            "received_at": row.received_at.isoformat(),
            "status": row.status_code,
            "outcome": row.outcome,
            "idempotency_key": row.idempotency_key,
            "run_id": str(row.run.code) if row.run else None,
            "network": row.ip,
        }
        for row in (rows if trigger is not None else [])
    ]
    if options["json"]:
        command.stdout.write(json.dumps(data, indent=2))
        return
    for row in data:
        run_id = row["run_id"] or "-"
        command.stdout.write(f"{row['received_at']}  {row['status']}  {row['outcome']}  {run_id}")
    if not data:
        command.stdout.write("no deliveries")


def handle(command: BaseCommand, options: dict) -> None:
    """Run ``tollgate webhook …``; write to command.stdout."""
    scenario = scenario_by_id(options["scenario"])
    trigger = WebhookTrigger.objects.filter(scenario=scenario).first()
    action = options["webhook_action"]
    if action == "create":
        trigger, secret = services.create_trigger(scenario, creator(scenario, options["user"]))
        wanted = WebhookTrigger.Format.GITHUB if options["github"] else WebhookTrigger.Format.TOLLGATE
        if trigger.format != wanted:
            trigger.format = wanted
            trigger.save(update_fields=["format"])
        _secret_out(command, options, trigger, secret, "create")
    elif action == "rotate":
        if trigger is None:
            raise CommandError("the scenario has no webhook: tollgate webhook create first")
        _secret_out(command, options, trigger, services.rotate(trigger), "rotate")
    else:
        _deliveries(command, options, trigger)
