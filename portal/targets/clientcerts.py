"""A target's client certificates (mutual TLS): saved encrypted from a checked pair, read back only
for a run's sealed secrets (``portal.runs.services.create_run``), forgotten on request. One way for
the page, the run form, the API and the CLI."""

from __future__ import annotations

import datetime as dt

from portal import vault
from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.lib.tls.clientcerts import ClientCert
from portal.targets.models import ClientCertificate, Target


def save_client_cert(target: Target, cert: ClientCert, *, request=None) -> ClientCertificate:
    """Store ``cert`` (checked by ``portal.lib.tls.clientcerts.load_pair``) on ``target``, replacing the
    one of its key type. Audited (the facts, never the key)."""
    stored, _ = ClientCertificate.objects.update_or_create(
        target=target,
        key_type=cert.key_type,
        defaults={
            "pair_enc": vault.seal(cert.engine()),
            "subject": cert.subject[:500],
            "issuer": cert.issuer[:500],
            "not_after": dt.datetime.fromisoformat(cert.not_after),
            "fingerprint_sha256": cert.fingerprint_sha256,
        },
    )
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        credential="client certificate",
        target=str(target.code),
        key=cert.key_type,
        fingerprint=cert.fingerprint_sha256,
        project_id=target.project_id,
    )
    return stored


def facts(stored: ClientCertificate) -> dict:
    return {
        "key_type": stored.key_type,
        "subject": stored.subject,
        "issuer": stored.issuer,
        "not_after": stored.not_after.isoformat(),
        "fingerprint_sha256": stored.fingerprint_sha256,
    }


def for_run(target: Target) -> tuple[dict, dict]:
    """The target's pairs for a run: ``({key type: {"cert", "key"}}, {key type: facts})``. Raises
    ``vault.SecretError`` when a pair cannot be decrypted."""
    pairs, public = {}, {}
    for stored in ClientCertificate.objects.filter(target=target).order_by("key_type"):
        pairs[stored.key_type] = vault.unseal(stored.pair_enc)
        public[stored.key_type] = facts(stored)
    return pairs, public


def forget(target: Target, key_type: str, *, request=None) -> bool:
    deleted, _ = ClientCertificate.objects.filter(target=target, key_type=key_type).delete()
    if deleted:
        audit.record(
            request,
            AuditEvent.Kind.CREDENTIAL_FORGOTTEN,
            credential="client certificate",
            target=str(target.code),
            key=key_type,
            project_id=target.project_id,
        )
    return bool(deleted)
