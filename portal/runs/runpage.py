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
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.crypto import salted_hmac

from portal.lib.kept import Kept
from portal.lib.targetnames import display_names
from portal.projects import switcher
from portal.projects.access import SESSION_KEY
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


@functools.cache
def _reads() -> tuple[QuerySet, QuerySet]:
    """The probe's two querysets without the request's values, built once per process: a view
    filters copies of them (building the ``values`` of joined fields was a quarter of a probe's cost)."""
    return (
        Run.objects.values(*STATE, *LINK_PATHS).order_by(),  # links sorted here: no ORDER BY to compile
        Target.objects.values_list("code", "name", "plain_url", "tls_url"),
    )


def probe(user, code) -> Probe:
    """The access check and the page's state (2 queries); 404 when the reader may not see the run."""
    runs, targets = _reads()
    # The role from the membership row the visibility filter joins (annotated after it: one join).
    found = runs.filter(code=code, project__memberships__user=user)
    rows = list(found.annotate(role=F("project__memberships__role")))
    if not rows:
        raise Http404("No such run")
    state = {name: rows[0][name] for name in (*STATE, "role")}
    same_name = targets.filter(name=state["target__name"], project__memberships__user=user)
    label = display_names(same_name)[state["target__code"]]
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
def csrf_slot() -> str:
    return "tollgate-csrf-" + salted_hmac("portal.runs.runpage", "csrf-slot").hexdigest()[:32]


def page_key(request: HttpRequest, found: Probe) -> str | None:
    """The key of the page for this reader and request; None when it is not kept (a run still going,
    messages to show)."""
    if not found.ended or len(messages.get_messages(request)):
        return None
    user = request.user
    projects = switcher.rows_marked(user, request.session.get(SESSION_KEY))
    inputs = (
        code_digest(),
        reporting.REPORT_CACHE_VERSION,
        sorted(found.state.items()),
        found.label,
        [sorted(link.items()) for link in found.links],
        user.pk,
        user.get_username(),
        [(m.project.code, m.project.name, m.role, m.project.personal_of_id, m.is_current) for m in projects],
        request.scheme,
        request.get_host(),
        request.get_full_path(),
    )
    return "run-page:" + hashlib.blake2b(repr(inputs).encode(), digest_size=20).hexdigest()


@dataclass(frozen=True)
class Page:
    """A rendered page as UTF-8, cut where the CSRF token goes: filling it in is joining bytes."""

    parts: tuple[bytes, ...]

    @classmethod
    def of(cls, html: str) -> Page:
        return cls(tuple(html.encode().split(csrf_slot().encode())))

    def fill(self, request: HttpRequest) -> HttpResponse:
        return HttpResponse(get_token(request).encode().join(self.parts))


def kept(key: str | None) -> Page | None:
    return _kept.get(key)


def forget_all() -> None:
    """Drop every page this process keeps (tests: a web process that never read them)."""
    _kept.clear()


def render(request: HttpRequest, code, key: str | None, ctx: dict) -> Page:
    """Render the page from ``ctx`` with its CSRF slot, and keep it under ``key`` when what it shows
    did not change while it rendered."""
    page = Page.of(render_to_string(TEMPLATE, ctx | {"csrf_token": csrf_slot()}, request))
    if key is not None and page_key(request, probe(request.user, code)) == key:
        _kept.put(key, page)
    return page
