"""The share panel of a run's page (``templates/sharing/_panel.html``): the Share form and the run's
links with their live view counts and a Revoke button where the reader may revoke.

It is rendered from plain rows (``LinkRow``), which ``portal.runs.runpage`` reads in the same query
as the run and the reader's role, and kept in this process by everything it shows (the rows with
their state and counts, the reader's rights, the page's path, the form's limits): a link's new view
changes its row, so the next page shows it. The CSRF token is rendered as the slot the caller gives
and filled in by the caller, per request.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import astuple, dataclass
from datetime import datetime

from django.template.loader import render_to_string

from portal.lib.kept import Kept
from portal.projects.access import can
from portal.projects.models import Role
from portal.sharing import services
from portal.sharing.forms import ShareForm
from portal.sharing.models import ShareLink

TEMPLATE = "sharing/_panel.html"
_kept: Kept[str] = Kept(256)


@dataclass(frozen=True)
class Account:
    """Who made or revoked a link, as the links table shows them."""

    username: str

    def get_username(self) -> str:
        return self.username


@dataclass(frozen=True)
class LinkRow:
    """One share link of the run, with what the links table shows of it."""

    code: uuid.UUID
    note: str
    created_by_id: int | None
    created_by: Account | None
    created: datetime
    expires_at: datetime
    view_count: int
    last_viewed_at: datetime | None
    revoked_at: datetime | None
    revoked_by: Account | None
    state: str
    may_revoke: bool


def link_row(user, role: str | None, values: tuple) -> LinkRow:
    """A row from ``(code, note, created_by_id, creator's username, created, expires_at, view_count,
    last_viewed_at, revoked_at, revoker's username)``; state and rights as of now."""
    code, note, creator_id, creator, created, expires, views, last, revoked, revoker = values
    # The model's own rules: its state (revoked, expired, active) and who may revoke it.
    link = ShareLink(created_by_id=creator_id, expires_at=expires, revoked_at=revoked)
    return LinkRow(
        code=code,
        note=note,
        created_by_id=creator_id,
        created_by=Account(creator) if creator is not None else None,
        created=created,
        expires_at=expires,
        view_count=views,
        last_viewed_at=last,
        revoked_at=revoked,
        revoked_by=Account(revoker) if revoker is not None else None,
        state=link.state,
        may_revoke=role is not None and services.may_revoke(user, link, role),
    )


def panel_html(request, run_code, role: str | None, links: list[LinkRow], *, csrf_slot: str) -> str:
    """The panel's HTML with ``csrf_slot`` where the CSRF token goes (the caller fills it in)."""
    inputs = (
        [astuple(link) for link in links],
        can(role, Role.MEMBER),
        str(run_code),
        request.get_full_path(),
        services.max_days(),
        services.default_days(),
        csrf_slot,
    )
    key = hashlib.blake2b(repr(inputs).encode(), digest_size=20).hexdigest()
    found = _kept.get(key)
    if found is not None:
        return found
    ctx = {
        "csrf_token": csrf_slot,
        "can_share": inputs[1],
        "form": ShareForm(),
        "query": f"run={run_code}",
        "links": links,
        "next": inputs[3],
        "what": "this run's report",
    }
    html = render_to_string(TEMPLATE, ctx)
    _kept.put(key, html)
    return html
