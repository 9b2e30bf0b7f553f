"""The page of an ended run (``runs-detail``), kept rendered whole (docs/performance.md, "The portal
under its own load").

An ended run's page changes only when something it shows changes, and rendering it (even with the
report section from the cache, ``portal.runs.fragments``) was most of a page read's cost. So:

* **Every request** reads, in one query (``portal.runs.access.run_page_rows``, prepared once per
  database connection on PostgreSQL), the run **only if the reader is a member of its project**
  (outsiders get 404, as before), the reader's role, and everything of the page that can change
  after the run ended: status, error, finish time, owner, the target (name, URLs, baseline and the
  baseline's code), the scenario's name and version, the frozen report's signature, how many of
  the reader's targets share the target's name, and the run's share links with their views. A
  removed member, a deleted run, a revoked link: the next request sees it, there is nothing to
  invalidate.
* **The page is kept** in this process (the 64 most recent) under a key made of all that,
  of the reader (id, username, role, the header's projects and the current one), of the scheme and
  host asked (the integrity block names them) and of a digest of the portal's code and templates.
* **Per request**, two slots of the kept page are filled in: the CSRF token (Django masks it anew for
  every request; the slot is a keyed digest, unguessable, never sent) and the share panel with its
  live view counts (``portal.sharing.panel``, kept by its own rows).
* A run still going, and a page with messages to show, are rendered anew and never kept. A page
  rendered while what it shows changed is not kept either (the key is read again after rendering).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.dateparse import parse_datetime
from django.utils.safestring import mark_safe

from portal.lib.kept import Kept
from portal.projects import switcher
from portal.projects.access import SESSION_KEY
from portal.runs import reporting
from portal.runs.access import RUN_PAGE_COLUMNS, run_page_rows
from portal.runs.models import Run
from portal.sharing import panel
from portal.targets.access import targets_for
from portal.targets.naming import target_labels

TEMPLATE = "runs/detail.html"
_kept: Kept[Page] = Kept(64)


@dataclass(frozen=True)
class Probe:
    """What one request read of the run: the run's page state, the reader's role, the share links."""

    code: uuid.UUID
    role: str
    terminal: bool
    state: tuple
    label: str | None
    links: list[panel.LinkRow]


def _uuid(value) -> uuid.UUID | None:
    return value if value is None or isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def _when(value) -> datetime | None:
    """An aware datetime (SQLite's raw rows give text or naive datetimes in UTC)."""
    if value is None or isinstance(value, datetime) and timezone.is_aware(value):
        return value
    value = parse_datetime(value) if isinstance(value, str) else value
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)


def probe(request: HttpRequest, code) -> Probe:
    """The access check and the page's state, in one query; 404 when the reader may not see the run."""
    user = request.user
    rows = run_page_rows(user, code)
    state = tuple(rows[0][:RUN_PAGE_COLUMNS])
    role, target_code, target_name, same_names = state[6], _uuid(state[7]), state[8], state[17]
    label = target_name
    if same_names != 1:  # another of the reader's targets has its name: the label tells them apart
        label = target_labels(targets_for(user), [target_name]).get(target_code)
    links = []
    for row in rows:
        v = row[RUN_PAGE_COLUMNS:]  # a share link of the run (none: the LEFT JOIN's one empty row)
        if v[0] is not None:
            v = (_uuid(v[0]), *v[1:4], _when(v[4]), _when(v[5]), v[6], _when(v[7]), _when(v[8]), v[9])
            links.append(panel.link_row(user, role, v))
    terminal = state[1] in Run.TERMINAL and state[2] is not None
    return Probe(code=code, role=role, terminal=terminal, state=state, label=label, links=links)


@functools.cache
def code_digest() -> str:
    """A digest of the portal's code and templates, read once per process: a release that changes
    what a page is made of renders anew."""
    base = Path(settings.BASE_DIR)
    digest = hashlib.sha256()
    for path in sorted([*(base / "portal").rglob("*.py"), *(base / "templates").rglob("*.html")]):
        digest.update(str(path.relative_to(base)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@functools.cache
def csrf_slot() -> str:
    return "tollgate-csrf-" + salted_hmac("portal.runs.runpage", "csrf-slot").hexdigest()[:32]


@functools.cache
def panel_slot() -> str:
    return "tollgate-share-panel-" + salted_hmac("portal.runs.runpage", "panel-slot").hexdigest()[:32]


def page_key(request: HttpRequest, found: Probe) -> str | None:
    """The key of the page for this reader; None when it is not kept (a run still going, messages)."""
    if not found.terminal or len(messages.get_messages(request)):
        return None
    user = request.user
    projects = switcher.rows_marked(user, request.session.get(SESSION_KEY))
    inputs = (
        code_digest(),
        reporting.REPORT_CACHE_VERSION,
        str(found.code),
        found.state,
        found.label,
        user.pk,
        user.get_username(),
        [(m.project.code, m.project.name, m.role, m.project.personal_of_id, m.is_current) for m in projects],
        request.scheme,
        request.get_host(),
    )
    return "run-page:" + hashlib.blake2b(repr(inputs).encode(), digest_size=20).hexdigest()


@dataclass(frozen=True)
class Page:
    """A rendered page as UTF-8, cut at its slots: the parts before and after the share panel, each
    cut where the CSRF token goes. Filling it in is joining bytes, not searching the page's text
    (100 KB for the bench's 5-arm run) twice."""

    before: tuple[bytes, ...]
    after: tuple[bytes, ...]

    @classmethod
    def of(cls, html: str) -> Page:
        before, _, after = html.partition(panel_slot())
        slot = csrf_slot().encode()
        return cls(tuple(before.encode().split(slot)), tuple(after.encode().split(slot)))


def kept(key: str | None) -> Page | None:
    return _kept.get(key)


def forget_all() -> None:
    """Drop every page this process keeps (tests: render anew)."""
    _kept.clear()


def fill(request: HttpRequest, found: Probe, page: Page) -> HttpResponse:
    """The response: the kept page with this request's share panel and CSRF token."""
    token = get_token(request).encode()
    share = panel.panel_html(request, found.code, found.role, found.links, csrf_slot=csrf_slot())
    share = token.join(share.encode().split(csrf_slot().encode()))
    return HttpResponse(b"".join((token.join(page.before), share, token.join(page.after))))


def respond(request: HttpRequest, found: Probe, key: str | None, ctx: dict) -> HttpResponse:
    """Render the page from ``ctx`` with its slots, keep it under ``key`` when what it shows did not
    change while it rendered, and answer it filled in."""
    ctx = ctx | {"csrf_token": csrf_slot(), "share_panel": mark_safe(panel_slot())}  # noqa: S308 - our slot
    page = Page.of(render_to_string(TEMPLATE, ctx, request))
    if key is not None and page_key(request, probe(request, found.code)) == key:
        _kept.put(key, page)
    return fill(request, found, page)
