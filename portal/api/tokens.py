"""Issuing, finding and revoking API tokens. A token is ``tg_`` + 32 random bytes (URL-safe base64,
256 bits), shown once; only its SHA-256 digest is stored, so finding one is a unique-index lookup of
the digest (no secret compared character by character in Python)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from portal.api.models import ApiToken
from portal.audit import log as audit
from portal.audit.models import AuditEvent

PREFIX = "tg_"
SHOWN_CHARS = 8  # "tg_" and 5 characters: enough to tell tokens apart in a list, useless to guess
# last_used is written at most this often, so a busy CI client does not write on every request.
LAST_USED_EVERY = timedelta(minutes=1)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def issue(user, project, *, scope: str, name: str, request=None) -> tuple[ApiToken, str]:
    """A new token of ``user`` in ``project``; returns the row and the plaintext (shown once). The
    caller has checked that the user is a member of the project. Audited."""
    plaintext = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        project=project,
        scope=scope,
        name=name,
        token_hash=digest(plaintext),
        prefix=plaintext[:SHOWN_CHARS],
    )
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        actor=user if request is None else None,
        credential="api_token",
        token=str(token.code),
        name=name,
        scope=scope,
        prefix=token.prefix,
        project_id=project.pk,
    )
    return token, plaintext


def revoke(token: ApiToken, *, request=None, actor=None, actor_name: str = "") -> bool:
    """Revoke ``token`` (audited); False when it was revoked already."""
    now = timezone.now()
    if not ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now):
        return False
    token.revoked_at = now
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_FORGOTTEN,
        actor=actor,
        actor_name=actor_name,
        credential="api_token",
        token=str(token.code),
        name=token.name,
        prefix=token.prefix,
        project_id=token.project_id,
    )
    return True


def find(presented: str) -> ApiToken | None:
    """The active token whose digest matches ``presented``, or None."""
    if not presented.startswith(PREFIX) or len(presented) > 200:
        return None
    wanted = digest(presented)
    token = (
        ApiToken.objects.select_related("user", "project")
        .filter(token_hash=wanted, revoked_at__isnull=True)
        .first()
    )
    # The index found it by digest; comparing the digests again costs nothing and keeps the rule.
    if token is None or not hmac.compare_digest(token.token_hash, wanted):
        return None
    return token


def touch(token: ApiToken) -> None:
    """Record the use, at most once a minute (one conditional UPDATE, nothing when recent)."""
    now = timezone.now()
    if token.last_used is not None and now - token.last_used < LAST_USED_EVERY:
        return
    ApiToken.objects.filter(pk=token.pk).filter(
        Q(last_used__isnull=True) | Q(last_used__lt=now - LAST_USED_EVERY)
    ).update(last_used=now)
    token.last_used = now
