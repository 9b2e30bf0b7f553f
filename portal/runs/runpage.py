"""The page of an ended run (``runs-detail``), kept rendered by what it shows: the run page's one cache.

Its report section is stored when the run ends (``portal.runs.fragments``); what the page shows around
it (header, status, the actions of the reader's role, the baseline pin, the target's label, the
scenario, the integrity block, the share panel) costs more to render than everything else of a view.
So:

* **Every request** reads through the ORM, by field name: the run **only if the reader is a member of
  its project** (outsiders get 404), the reader's role and what the page shows that can change after
  the run ended (``STATE``: status, error, owner, target name, URLs and baseline, scenario name and
  version, the frozen report's signature) and its share links with what the panel shows of them
  (``LINK``, with their state now: a link expires by time), one row per link (1 query); the reader's
  targets of the target's name, which make its label (1). A removed member, a renamed target, a new
  view of a link: the next request sees it, there is nothing to invalidate.
* **The page is kept** in this process (the 64 most recent) under a key made of all that, of the
  reader (id, username, the header's projects and the current one), of the scheme, host and path
  asked (the integrity block names the host, the share panel's forms come back to the path) and of
  a digest of the portal's code and templates.
* **Per request**, the CSRF token is filled in at its slot (Django masks it anew for every request;
  the slot is a keyed digest, unguessable, never sent).
* A run still going and a page with messages to show are rendered anew and never kept; nor is a page
  rendered while what it shows changed (its key is read again after rendering).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.db.models import F, Func, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.defaultfilters import date as date_format
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.html import escape
from django.utils.timezone import template_localtime

from portal.compiled import Compiled
from portal.lib.kept import Kept
from portal.lib.report.targetnames import display_names
from portal.projects import switcher
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership
from portal.runs import reporting
from portal.runs.models import Run
from portal.targets.models import Target

TEMPLATE = "runs/detail.html"
# What the page shows around the stored section that can change after the run ended (codes, the
# config and the created time never do; the report and the section are keyed by the finish time).
STATE = (
    "pk",
    "status",
    "finished",
    "error",
    "owner_id",
    "target__code",
    "target__name",
    "target__plain_url",
    "target__tls_url",
    "target__baseline_id",
    "scenario_id",
    "scenario__name",
    "scenario_version",
    "frozen_report__sha256",
    "frozen_report__key_id",
    "frozen_report__signed_at",
)
# What the share panel shows of each link.
LINK = (
    "pk",
    "note",
    "created_by_id",
    "created_by__username",
    "expires_at",
    "view_count",
    "last_viewed_at",
    "revoked_at",
    "revoked_by__username",
)
_kept: Kept[Page] = Kept(64)


@dataclass(frozen=True)
class Probe:
    """What one request read of the run: its page's state with the reader's role, the target's
    label among the reader's targets, the share links with their state now."""

    state: dict
    label: str
    links: tuple[dict, ...]

    @property
    def ended(self) -> bool:
        return self.state["status"] in Run.TERMINAL and self.state["finished"] is not None


# The share links' fields as read with the run: one row per link (one row without any).
LINK_PATHS = {f"share_links__{name}": name for name in LINK}


def _page_state(code, user_id) -> QuerySet:
    """The run only if the reader is a member of its project, with the reader's role (from the
    membership row the visibility filter joins), ``STATE``, how many of the reader's targets have
    the target's name, and its share links: one row per link."""
    same_name = Target.objects.filter(name=OuterRef("target__name"), project__memberships__user=user_id)
    same_name = same_name.order_by().annotate(n=Func(F("pk"), function="COUNT")).values("n")
    found = Run.objects.values(*STATE, *LINK_PATHS).filter(code=code, project__memberships__user=user_id)
    # Links sorted in Python: no ORDER BY.
    return found.annotate(role=F("project__memberships__role"), same_names=Subquery(same_name)).order_by()


# Compiled once per thread (portal.compiled): compiling the page state's joins cost more than running them.
PAGE_STATE = Compiled(
    _page_state, code=Run._meta.get_field("code"), user_id=Membership._meta.get_field("user")
)


def _label(user, state: dict) -> str:
    """The target's name, told apart from the reader's other targets of that name (1 query, only
    when there are some)."""
    if state["same_names"] == 1:
        return state["target__name"]
    same_name = Target.objects.filter(name=state["target__name"], project__memberships__user=user)
    return display_names(same_name.values_list("code", "name", "plain_url", "tls_url"))[state["target__code"]]


def probe(user, code) -> Probe:
    """The access check and the page's state (1 query); 404 when the reader may not see the run."""
    rows = PAGE_STATE.rows(code=code, user_id=user.pk)
    if not rows:
        raise Http404("No such run")
    state = {name: rows[0][name] for name in (*STATE, "role")}
    label = _label(user, rows[0])
    now = timezone.now()
    links = tuple(
        {name: row[path] for path, name in LINK_PATHS.items()}
        | {"expired": row["share_links__expires_at"] <= now}
        for row in sorted(rows, key=lambda row: row["share_links__pk"] or 0)
        if row["share_links__pk"] is not None
    )
    return Probe(state=state, label=label, links=links)


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
def slot_prefix() -> str:
    """What starts a slot of a kept page: a keyed digest, unguessable, never sent."""
    return "tollgate-slot-" + salted_hmac("portal.runs.runpage", "slots").hexdigest()[:32]


def slot(kind: str, pk: int | str = "") -> str:
    """A slot of the kept page: ``csrf`` (the token), ``views`` and ``last`` (a share link's view
    count and last view, which change on every view of the link)."""
    return f"{slot_prefix()}:{kind}:{pk}:"


@functools.cache
def _slots() -> re.Pattern:
    return re.compile(re.escape(slot_prefix().encode()) + rb":(csrf|views|last):(\d*):")


# What the share panel shows of a link that changes on every view of it: filled in per request.
VIEWED = ("view_count", "last_viewed_at")


def page_key(request: HttpRequest, found: Probe) -> str | None:
    """The key of the page for this reader and request; None when it is not kept (a run still going,
    messages to show). A link's views are not part of it: they are filled in at their slots."""
    if not found.ended or len(messages.get_messages(request)):
        return None
    user = request.user
    projects = switcher.rows_marked(user, request.session.get(SESSION_KEY))
    inputs = (
        code_digest(),
        reporting.REPORT_CACHE_VERSION,
        sorted(found.state.items()),
        found.label,
        [sorted(item for item in link.items() if item[0] not in VIEWED) for link in found.links],
        user.pk,
        user.get_username(),
        [(m.project.code, m.project.name, m.role, m.project.personal_of_id, m.is_current) for m in projects],
        request.scheme,
        request.get_host(),
        request.get_full_path(),
    )
    return "run-page:" + hashlib.blake2b(repr(inputs).encode(), digest_size=20).hexdigest()


def _slot_values(request: HttpRequest, found: Probe) -> dict[tuple[bytes, bytes], bytes]:
    """What this request puts in the slots: the CSRF token, each link's views and last view (shown
    as the links table shows them)."""
    values = {(b"csrf", b""): get_token(request).encode()}
    for link in found.links:
        pk = str(link["pk"]).encode()
        last = date_format(template_localtime(link["last_viewed_at"]), "Y-m-d H:i:s") or "never"
        values[b"views", pk] = str(link["view_count"]).encode()
        values[b"last", pk] = escape(last).encode()
    return values


@dataclass(frozen=True)
class Page:
    """A rendered page as UTF-8, cut at its slots: filling it in is joining bytes."""

    parts: tuple[bytes, ...]  # the text between the slots: one more than the slots
    slots: tuple[tuple[bytes, bytes], ...]  # (kind, link pk or b"")

    @classmethod
    def of(cls, html: str) -> Page:
        cut = _slots().split(html.encode())
        return cls(tuple(cut[::3]), tuple(zip(cut[1::3], cut[2::3], strict=True)))

    def fill(self, request: HttpRequest, found: Probe) -> HttpResponse:
        values = _slot_values(request, found)
        out = [self.parts[0]]
        for where, part in zip(self.slots, self.parts[1:], strict=True):
            out += (values.get(where, b""), part)  # a link gone since the page was rendered: nothing
        return HttpResponse(b"".join(out))


def kept(key: str | None) -> Page | None:
    return _kept.get(key)


def forget_all() -> None:
    """Drop every page this process keeps (tests: a web process that never read them)."""
    _kept.clear()


def render(request: HttpRequest, code, key: str | None, ctx: dict) -> tuple[Page, Probe | None]:
    """Render the page from ``ctx`` with its slots, and keep it under ``key`` when what it shows did
    not change while it rendered; with the state read after rendering (None when not kept)."""
    ctx = ctx | {"csrf_token": slot("csrf")}
    if key is not None:  # the share panel's views in slots (sharing/_links_table.html)
        ctx["share_view_slot"] = slot
    page = Page.of(render_to_string(TEMPLATE, ctx, request))
    after = None
    if key is not None:
        after = probe(request.user, code)
        if page_key(request, after) == key:
            _kept.put(key, page)
    return page, after
