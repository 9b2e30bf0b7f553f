"""The page of an ended run (``runs-detail``), kept rendered by what it shows.

Its report section is stored when the run ends (``portal.runs.pages``); what the page shows around
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
* **The page is kept** in this process's ``pages`` cache (``portal.runs.pages.KEPT``: Django's
  in-memory cache, the most recent kept) under a key made of all that, of the reader (id, username,
  the header's projects and the current one), of the scheme, host and path asked (the integrity
  block names the host, the share panel's forms come back to the path) and of the digest of the
  portal's code and templates (``pages.code_digest``).
* **Per request**, the CSRF token (Django masks it anew for every request) and each share link's
  views and last view are filled in at their slots (``pages.slot``).
* A run still going and a page with messages to show are rendered anew and never kept; nor is a page
  rendered while what it shows changed (its key is read again after rendering).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.contrib import messages
from django.core.cache import caches
from django.db.models import F, Func, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.defaultfilters import date as date_format
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.html import escape
from django.utils.timezone import template_localtime

from portal.compiled import Compiled
from portal.lib.report.targetnames import display_names
from portal.projects import switcher
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership
from portal.runs import pages, reporting
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


@dataclass(frozen=True)
class PageState:
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


# Its SQL made once (portal.compiled): compiling the page state's joins cost ten times running them.
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


def read_state(user, code) -> PageState:
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
    return PageState(state=state, label=label, links=links)


# What the share panel shows of a link that changes on every view of it: filled in per request.
VIEWED = ("view_count", "last_viewed_at")


def page_key(request: HttpRequest, found: PageState) -> str | None:
    """The key of the page for this reader and request; None when it is not kept (a run still going,
    messages to show). A link's views are not part of it: they are filled in at their slots."""
    if not found.ended or len(messages.get_messages(request)):
        return None
    user = request.user
    projects = switcher.rows_marked(user, request.session.get(SESSION_KEY))
    inputs = (
        pages.code_digest(),
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


def _slot_values(request: HttpRequest, found: PageState) -> dict[tuple[str, str], str]:
    """What this request puts in the slots: the CSRF token, each link's views and last view (shown
    as the links table shows them)."""
    values = {("csrf", ""): get_token(request)}
    for link in found.links:
        pk = str(link["pk"])
        last = date_format(template_localtime(link["last_viewed_at"]), "Y-m-d H:i:s") or "never"
        values["views", pk] = str(link["view_count"])
        values["last", pk] = escape(last)
    return values


def kept(key: str | None) -> pages.Slotted | None:
    return None if key is None else caches[pages.KEPT].get(key)


def forget_all() -> None:
    """Drop every page this process keeps (tests: a web process that never read them)."""
    caches[pages.KEPT].clear()


def fill(page: pages.Slotted, request: HttpRequest, found: PageState) -> HttpResponse:
    return HttpResponse(page.fill(_slot_values(request, found)))


def render(request: HttpRequest, code, key: str | None, ctx: dict) -> tuple[pages.Slotted, PageState | None]:
    """Render the page from ``ctx`` with its slots, and keep it under ``key`` when what it shows did
    not change while it rendered; with the state read after rendering (None when not kept)."""
    ctx = ctx | {"csrf_token": pages.slot("csrf")}
    if key is not None:  # the share panel's views in slots (sharing/_links_table.html)
        ctx["share_view_slot"] = pages.slot
    page = pages.Slotted.of(render_to_string(TEMPLATE, ctx, request), encoded=True)
    after = None
    if key is not None:
        after = read_state(request.user, code)
        if page_key(request, after) == key:
            caches[pages.KEPT].set(key, page)
    return page, after
