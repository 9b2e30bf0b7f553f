"""Saving a target's SSH access from the checked SSH form: one way for the page and the CLI."""

from __future__ import annotations

from django.utils import timezone

from portal import vault
from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.lib.security.sshkeys import generate_key, key_from_known_hosts, public_line
from portal.targets.models import SshAccess, Target


def save_ssh_access(target: Target, data: dict, *, keep_process: bool = False, request=None) -> SshAccess:
    """``data``: SshAccessForm's cleaned data. The private key is stored encrypted only; the host key
    is pinned from the given known_hosts line, or forgotten when the server moved. ``keep_process``
    keeps the stored process name (the CLI without --server-process). Audited."""
    access = SshAccess.objects.filter(target=target).first() or SshAccess(target=target)
    moved = (access.host, access.port) != (data["host"], data["port"])
    access.host, access.port, access.username = data["host"], data["port"], data["username"]
    if not keep_process:
        access.server_process = data["server_process"]
    if data["key_source"] == "generate":
        pem, public = generate_key()
        access.private_key_enc, access.public_key = vault.encrypt(pem), public
    elif data["key_source"] == "paste":
        pem = data["private_key"].strip() + "\n"
        access.private_key_enc, access.public_key = vault.encrypt(pem), public_line(pem)
    known = (data.get("known_hosts") or "").strip()
    if known:
        key = key_from_known_hosts(known, data["host"], data["port"])
        access.known_hosts, access.host_key_fingerprint, access.pinned_at = (
            known,
            key.fingerprint,
            timezone.now(),
        )
    elif moved:
        # Another server: its key is not the pinned one.
        access.known_hosts, access.host_key_fingerprint, access.pinned_at = "", "", None
    access.full_clean(exclude=["target"])  # the model's own rules, once more
    access.save()
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        credential="ssh",
        target=str(target.code),
        key=data["key_source"],
        project_id=target.project_id,
    )
    return access
