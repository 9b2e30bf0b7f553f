"""``tollgate rotate-secrets``: every stored secret of every app sealed again with the first key of
``TOLLGATE_SECRET_KEYS``, in one transaction (a token no key opens stops everything; nothing is
changed). Each app rotates its own columns where it has a service for it (signing keys, webhook
secrets, alert channel URLs); the runs' and scenarios' sealed configs and the targets' SSH keys and
client certificates are rotated here."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from portal import vault
from portal.alerts import services as alert_services
from portal.hooks import services as hooks_services
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.signing import services as signing_services
from portal.targets.models import ClientCertificate, SshAccess

ACTIONS: tuple[str, ...] = ("rotate-secrets",)


def add_arguments(sub) -> None:
    sub.add_parser(
        "rotate-secrets", help="re-encrypt every stored secret with the first key of TOLLGATE_SECRET_KEYS"
    )


def handle(command: BaseCommand, options: dict) -> None:
    counts = {"runs": 0, "scenarios": 0}
    with transaction.atomic():
        for model, label in ((Run, "runs"), (Scenario, "scenarios")):
            for obj in (
                model.objects.select_for_update().filter(config__has_key="secrets").only("pk", "config")
            ):
                token = obj.config.get("secrets")
                if not token:
                    continue
                try:
                    obj.config["secrets"] = vault.rotate(token)
                except vault.SecretError as exc:
                    raise CommandError(f"{label[:-1]} {obj.pk}: {exc}; nothing was changed") from None
                model.objects.filter(pk=obj.pk).update(config=obj.config)
                counts[label] += 1
        # Said together: "SSH key(s) and client certificate(s)".
        counts["ssh_keys"] = _rotate_field(SshAccess, "private_key_enc", "SSH key of target access")
        counts["ssh_keys"] += _rotate_field(ClientCertificate, "pair_enc", "client certificate")
        try:
            counts["signing_keys"] = signing_services.reseal_keys()
            counts["webhooks"] = hooks_services.rotate_stored_secrets()
            counts["alert_channels"] = alert_services.rotate_stored_secrets()
        except vault.SecretError as exc:
            raise CommandError(f"{exc}; nothing was changed") from None
    command.stdout.write(
        f"re-encrypted the secrets of {counts['runs']} run(s) and {counts['scenarios']} scenario(s) "
        f"and {counts['ssh_keys']} SSH key(s) and client certificate(s) "
        f"and {counts['signing_keys']} report-signing key(s) "
        f"and {counts['webhooks']} webhook secret(s) and {counts['alert_channels']} alert channel URL(s)"
    )


def _rotate_field(model, field: str, what: str) -> int:
    """Seal each row's ``field`` again with the newest Fernet key (inside the caller's transaction):
    how many; a token no key opens stops everything (``CommandError`` naming the row)."""
    rotated = 0
    for row in model.objects.select_for_update().only("pk", field):
        try:
            token = vault.rotate(getattr(row, field))
        except vault.SecretError as exc:
            raise CommandError(f"{what} {row.pk}: {exc}; nothing was changed") from None
        model.objects.filter(pk=row.pk).update(**{field: token})
        rotated += 1
    return rotated
