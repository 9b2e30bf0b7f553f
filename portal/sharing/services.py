"""Share links: create, resolve, revoke. The API, webhooks and the CLI create links through here.

A link's token is its only credential: 192 random bits (``secrets.token_urlsafe(24)``), shown once
to its creator and stored as its sha256 digest, so the database (a backup, a dump) never holds a
working link."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import F
from django.http import Http404
from django.urls import reverse
from django.utils import timezone

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.sharing.models import NOTE_MAX, USER_AGENT_MAX, ShareLink, ShareView

DEFAULT_DAYS = 30
MIN_COMPARE, MAX_COMPARE = 2, 10
TOKEN_BYTES = 24  # 192 bits
TOKEN_MAX_CHARS = 64  # anything longer is no token of ours: 404 without hashing it
# CI polls status.json every few seconds for the length of a run: the polls of one client (network
# and user agent) within this many seconds of its last logged poll count as that one view.
POLL_COALESCE_S = 60
POLLED = ("status.json",)


class ShareGone(Exception):
    """The link exists but no longer opens: revoked or expired (HTTP 410, the page says which)."""

    def __init__(self, link: ShareLink, reason: str) -> None:
        super().__init__(reason)
        self.link = link
        self.reason = reason  # "revoked" or "expired"

    @property
    def when(self):
        return self.link.revoked_at if self.reason == "revoked" else self.link.expires_at


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def max_days() -> int:
    return settings.TOLLGATE_SHARE_MAX_DAYS


def default_days() -> int:
    return min(DEFAULT_DAYS, max_days())


def _check_days(days) -> int:
    if days is None:
        return default_days()
    if isinstance(days, bool) or not isinstance(days, int):
        raise ValueError(f"days must be a whole number of days, got {days!r}")
    if days < 1:
        raise ValueError("days must be at least 1")
    if days > max_days():
        raise ValueError(
            f"days must be at most {max_days()} (the operator's maximum, TOLLGATE_SHARE_MAX_DAYS)"
        )
    return days


def check_note(note: str) -> str:
    note = (note or "").strip()
    if len(note) > NOTE_MAX:
        raise ValueError(f"the note has {len(note)} characters; at most {NOTE_MAX}")
    try:
        note.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the note is not valid UTF-8 text") from None
    if any(ord(ch) < 32 for ch in note):
        raise ValueError("the note must be one line of text (no control characters)")
    return note


def _subject(run, runs) -> tuple[int, list]:
    """(project id, runs) of what is shared; ValueError for anything but one run or 2–10 runs of
    one project."""
    if (run is None) == (runs is None):
        raise ValueError("share either one run or a list of runs to compare")
    if run is not None:
        return run.project_id, [run]
    runs = list(runs)
    codes = [str(r.code) for r in runs]
    if len(set(codes)) != len(codes):
        raise ValueError("a run appears twice in the compare view")
    if not MIN_COMPARE <= len(runs) <= MAX_COMPARE:
        raise ValueError(f"a compare view shares {MIN_COMPARE} to {MAX_COMPARE} runs, got {len(runs)}")
    if len({r.project_id for r in runs}) != 1:
        raise ValueError("the runs of a compare view must all belong to one project")
    return runs[0].project_id, runs


def create_share(user, *, run=None, runs=None, days: int | None = None, note: str = "", request=None):
    """A new read-only link to ``run`` (or a compare view of ``runs``, a list of runs of one project).
    ``days`` defaults to 30 and is capped by the operator's maximum (ValueError beyond it). Returns
    ``(link, token)``; the token is shown once and stored only hashed.

    ``user`` must be a member or owner of the project (PermissionDenied otherwise); ``None`` is the
    system itself (a link made for a webhook-started run), recorded without a creator. ``request``
    (optional) gives the audit event its client network."""
    project_id, subject = _subject(run, runs)
    days = _check_days(days)
    note = check_note(note)
    if user is not None and not can(role_in(user, project_id), Role.MEMBER):
        raise PermissionDenied("sharing needs the member role in the run's project")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    link = ShareLink.objects.create(
        project_id=project_id,
        created_by=user,
        kind=ShareLink.Kind.RUN if run is not None else ShareLink.Kind.COMPARE,
        run=run,
        run_codes=[] if run is not None else [str(r.code) for r in subject],
        note=note,
        token_hash=hash_token(token),
        expires_at=timezone.now() + timedelta(days=days),
    )
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        actor=user,
        actor_name="" if user is not None else "system",
        credential="share link",
        link=str(link.code),
        runs=[str(r.code) for r in subject],
        expires_at=link.expires_at.isoformat(),
        note=note,
        project_id=project_id,
    )
    return link, token


def _absolute(path: str, request=None) -> str:
    return request.build_absolute_uri(path) if request is not None else settings.TOLLGATE_BASE_URL + path


def share_url(token: str, request=None) -> str:
    """Absolute URL of the shared page (``/s/<token>/``)."""
    return _absolute(reverse("sharing-view", args=[token]), request)


def status_url(token: str, request=None) -> str:
    """Absolute URL of the shared run's status JSON (``/s/<token>/status.json``): a read-only
    capability link CI can poll without a session."""
    return _absolute(reverse("sharing-status", args=[token]), request)


def may_revoke(user, link: ShareLink, role: str | None = None) -> bool:
    """Its creator (while still a member: a viewer too, e.g. demoted since) or an owner of the project."""
    role = role if role is not None else role_in(user, link.project_id)
    if role is None:
        return False
    return link.created_by_id == user.pk or can(role, Role.OWNER)


def revoke(link: ShareLink, user, request=None, *, operator: bool = False) -> bool:
    """Revoke the link for good (PermissionDenied unless ``may_revoke``; ``operator``: the operator's
    CLI, allowed anything, ``user`` may be None). False when it was revoked already (the first
    revocation's time and user stay)."""
    if not operator and not may_revoke(user, link):
        raise PermissionDenied("only the link's creator or a project owner may revoke it")
    now = timezone.now()
    updated = ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(
        revoked_at=now, revoked_by=user
    )
    if not updated:
        link.refresh_from_db()
        return False
    link.revoked_at, link.revoked_by = now, user
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_FORGOTTEN,
        actor=user,
        actor_name="" if user is not None else "operator (CLI)",
        credential="share link",
        link=str(link.code),
        note=link.note,
        project_id=link.project_id,
    )
    return True


def find(token: str) -> ShareLink | None:
    """The link of a token whatever its state (the CLI revokes by URL), or None."""
    if not token or len(token) > TOKEN_MAX_CHARS:
        return None
    return ShareLink.objects.filter(token_hash=hash_token(token)).first()


def resolve(token: str) -> ShareLink:
    """The link of a token: Http404 for no such link, ShareGone (410) when revoked or expired."""
    if not token or len(token) > TOKEN_MAX_CHARS:
        raise Http404("no such share link")
    digest = hash_token(token)
    link = (
        ShareLink.objects.select_related("run", "run__target", "run__scenario")
        .filter(token_hash=digest)
        .first()
    )
    # The lookup is by digest (an index); the comparison of the digest itself is constant-time.
    if link is None or not hmac.compare_digest(link.token_hash, digest):
        raise Http404("no such share link")
    if link.revoked_at:
        raise ShareGone(link, "revoked")
    if link.is_expired:
        raise ShareGone(link, "expired")
    return link


def record_view(link: ShareLink, request, what: str) -> None:
    """Log one use of the link and bump its counters in the database (F(): concurrent views add up)."""
    now = timezone.now()
    ip = audit.client_network(request)
    user_agent = request.META.get("HTTP_USER_AGENT", "").replace("\x00", "")[:USER_AGENT_MAX]
    if (
        what in POLLED
        and ShareView.objects.filter(
            link=link,
            what=what,
            ip=ip,
            user_agent=user_agent,
            at__gte=now - timedelta(seconds=POLL_COALESCE_S),
        ).exists()
    ):
        ShareLink.objects.filter(pk=link.pk).update(last_viewed_at=now)
        return
    ShareView.objects.create(link=link, ip=ip, user_agent=user_agent, what=what)
    ShareLink.objects.filter(pk=link.pk).update(view_count=F("view_count") + 1, last_viewed_at=now)
