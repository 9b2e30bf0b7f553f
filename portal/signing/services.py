"""Report signing: the active key (made at first use), rotation, the published keys and the freeze
of a run's report when the run ends (``workers/runner.py`` calls ``freeze_after_end``)."""

from __future__ import annotations

import base64
import json
import logging

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal import vault
from portal.audit.log import record
from portal.audit.models import AuditEvent
from portal.lib.security import redaction, signing
from portal.runs.models import Run
from portal.runs.reporting import run_report
from portal.signing.models import FrozenReport, SigningKey

log = logging.getLogger(__name__)


class FreezeError(Exception):
    """The report could not be frozen (not ended, or its JSON does not survive a round trip)."""


def _new_key() -> SigningKey:
    private = signing.generate()
    public = private.public_key()
    raw = base64.b64encode(private.private_bytes_raw()).decode("ascii")
    return SigningKey(
        key_id=signing.key_id(public),
        public_key=signing.public_b64(public),
        private_key_enc=vault.seal({"ed25519": raw}),
    )


def active_key(*, lock: bool = False) -> SigningKey:
    """The key that signs new reports; made at first use. Two processes making the first key at once:
    the unique constraint lets one win and the other reads its key. ``lock`` (inside a transaction)
    holds the row until the commit, so a rotation waits for a signature in progress."""
    for _ in range(3):
        active = SigningKey.objects.filter(retired_at__isnull=True)
        key = (active.select_for_update() if lock else active).first()
        if key is not None:
            return key
        try:
            with transaction.atomic():
                key = _new_key()
                key.save()
            log.info("created the report-signing key %s", key.key_id)
            return key
        except IntegrityError:
            continue  # another process made it first: read theirs
    raise RuntimeError("no active report-signing key could be made or read")


def private_key(key: SigningKey) -> Ed25519PrivateKey:
    raw = base64.b64decode(vault.unseal(key.private_key_enc)["ed25519"])
    return Ed25519PrivateKey.from_private_bytes(raw)


def rotate_key() -> tuple[SigningKey, SigningKey | None]:
    """Retire the active key (it stays published) and make a new one. Returns (new, retired)."""
    with transaction.atomic():
        old = SigningKey.objects.select_for_update().filter(retired_at__isnull=True).first()
        if old is not None:
            old.retired_at = timezone.now()
            old.save(update_fields=["retired_at"])
        new = _new_key()
        new.save()
        record(
            None,
            AuditEvent.Kind.CREDENTIAL_SAVED,
            credential="report-signing key",
            key_id=new.key_id,
            retired=old.key_id if old else None,
        )
    return new, old


def published() -> list[dict]:
    """Every key that ever signed, oldest first, as ``/.well-known/tollgate-report-keys.json`` lists it."""
    return [
        {
            "key_id": key.key_id,
            "algorithm": signing.ALGORITHM,
            "public_key": key.public_key,
            "created": key.created.isoformat(),
            "retired": key.retired_at.isoformat() if key.retired_at else None,
        }
        for key in SigningKey.objects.order_by("created", "pk")
    ]


def public_keys() -> dict[str, Ed25519PublicKey]:
    """This portal's published keys, for ``portal.lib.security.signing.verify``."""
    return signing.parse_keys({"keys": published()})


def freeze(run: Run) -> FrozenReport:
    """Sign the report of an ended run and store it, once: a frozen report is never signed again (a
    second call, or a race with another process, returns the stored one)."""
    existing = FrozenReport.objects.filter(run_id=run.pk).first()
    if existing is not None:
        return existing
    run.refresh_from_db()
    if not run.is_terminal:
        raise FreezeError(f"run {run.code} is {run.status}: only an ended run's report is frozen")
    # request=None: the report's links use TOLLGATE_BASE_URL, the same whoever downloads it.
    report = run_report(run)
    try:
        # The stored text is the canonical form, parsed back: what the auditor hashes is what was signed.
        report = json.loads(signing.canonical(report))
    except (TypeError, ValueError) as exc:
        raise FreezeError(f"run {run.code}: the report is not canonical JSON ({exc})") from exc
    try:
        with transaction.atomic():
            key = active_key(lock=True)
            signed_at = timezone.now()
            integrity = signing.sign(report, private_key(key), key.key_id, signed_at.isoformat())
            body = signing.dumps({**report, signing.INTEGRITY: integrity})
            return FrozenReport.objects.create(
                run=run, body=body, sha256=integrity["sha256"], key_id=key.key_id, signed_at=signed_at
            )
    except IntegrityError:
        # Frozen meanwhile by another process (the reaper and a late finish): theirs stands.
        return FrozenReport.objects.get(run_id=run.pk)


def freeze_after_end(run: Run) -> FrozenReport | None:
    """``freeze`` for the worker's end of a run: a failure is logged and never breaks the finish."""
    try:
        with transaction.atomic():  # a savepoint: a failure here never breaks the caller's transaction
            return freeze(run)
    except Exception:
        log.exception("run %s: could not freeze and sign its report", run.code)
        return None


def redact_credential_names(frozen_model=FrozenReport, key_model=SigningKey) -> int:
    """Sign again, once, each frozen report that names a Basic-auth user (frozen before reports left
    the name out: ``portal.lib.security.redaction``), without the name, with the active key and the time of
    the redaction — the one case a frozen report is signed again (docs/auditors.md). Returns how
    many. The models are parameters so that migration signing 0002 runs it on its historical ones."""
    count, key = 0, None
    for frozen in frozen_model.objects.filter(body__contains='"user":').order_by("pk"):
        report = json.loads(frozen.body)
        redacted = redaction.without_credential_names(
            {name: value for name, value in report.items() if name != signing.INTEGRITY}
        )
        if redacted is None:
            continue
        if key is None:
            key = key_model.objects.filter(retired_at__isnull=True).order_by("pk").first()
            if key is None:  # a portal that froze reports always has an active key; never guess one
                raise RuntimeError("no active report-signing key to sign the redacted reports with")
        signed_at = timezone.now()
        integrity = signing.sign(redacted, private_key(key), key.key_id, signed_at.isoformat())
        frozen_model.objects.filter(pk=frozen.pk).update(
            body=signing.dumps({**redacted, signing.INTEGRITY: integrity}),
            sha256=integrity["sha256"],
            key_id=key.key_id,
            signed_at=signed_at,
        )
        count += 1
    return count


def reseal_keys() -> int:
    """Re-encrypt every private key with the first key of TOLLGATE_SECRET_KEYS (``tollgate
    rotate-secrets``, inside its transaction). SecretError names the key it cannot read."""
    count = 0
    for key in SigningKey.objects.select_for_update().only("pk", "key_id", "private_key_enc"):
        try:
            sealed = vault.rotate(key.private_key_enc)
        except vault.SecretError as exc:
            raise vault.SecretError(f"report-signing key {key.key_id}: {exc}") from None
        SigningKey.objects.filter(pk=key.pk).update(private_key_enc=sealed)
        count += 1
    return count
