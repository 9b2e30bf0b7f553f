"""The report section of a run's page (``templates/runs/_report.html``), rendered once when the run
ends and stored beside its report; and the body of a compare view of ended runs
(``templates/runs/_compare_body.html``), rendered once and kept in the cache.

An ended run's report never changes, and rendering its section (tables of every arm and round, the
chart data as JSON, TLS facts, probes, method) is most of the page's cost. So the worker renders it
when the run ends (``store_after_end``) and stores it in the run's ``RunReport`` row
(``section``, with the status line's evidence). The run page and the shared page serve it with
what can change after the run ended, or differs between them, filled in per request at its live
slots (``LIVE``): the JSON download link (on the shared page it holds the link's token, a
credential kept nowhere but hashed), the scenario (its name can change) and, on the portal's page
only, the links to the target's SSH access (named by the target's label among the reader's
targets). Everything else the page shows around it (header, the run's status and actions for the
reader's role, the baseline pin, the integrity block, the share panel) is rendered per request.

The stored section is keyed by ``section_key``: the report's key (run, finish time,
``REPORT_CACHE_VERSION``) and a digest of the templates and code it is made of. A section stored
under another key (a report stored before sections were, a release that changed the template, the
report's schema or its computation) is rendered again on its next view and stored again. The run
page keeps whole pages (``portal.runs.runpage``), so the section's row is read only when a page is
rendered. A run still going is rendered on every request and never stored.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from portal.lib.kept import Kept
from portal.runs import pages, reporting
from portal.runs.live import cache_get, cache_set
from portal.runs.models import Run, RunReport

log = logging.getLogger(__name__)
TEMPLATE = "runs/_report.html"
COMPARE_TEMPLATE = "runs/_compare_body.html"
TTL_S = reporting.REPORT_CACHE_TTL_S
# The section's live slots, filled in per request. A slot is an HTML comment in the stored HTML:
# text of users (target, scenario and arm names, errors) is escaped, so it can never make one.
LIVE = ("json_download_url", "scenario", "ssh_check", "ssh_access")
SLOTS = {name: mark_safe(f"<!--live:{name}-->") for name in LIVE}  # noqa: S308 - our constants
SLOT = re.compile(r"<!--live:(\w+)-->")
# What the section's HTML is made from besides the report: its templates, its filters and the code
# that builds its context (portal/lib holds the evidence, costs and validity wording).
SOURCES = (("templates", "*.html"), ("portal/runs/templatetags", "*.py"), ("portal/lib", "*.py"))
SOURCE_FILES = ("portal/runs/pages.py", "portal/runs/fragments.py")


# A key's value never changes (the key names everything it is made of), so each web process keeps
# the most recently read compare bodies in memory.
_local: Kept[object] = Kept(64)


def _cached(key: str | None):
    if key is None:
        return None
    found = _local.get(key)
    if found is not None:
        return found
    found = cache_get(key)
    if found is not None:
        _local.put(key, found)
    return found


def _store(key: str | None, value) -> None:
    if key is not None:
        cache_set(key, value, TTL_S)
        _local.put(key, value)


@functools.cache
def source_digest() -> str:
    """A digest of every file the section's HTML depends on, read once per process."""
    base = Path(settings.BASE_DIR)
    paths = [p for folder, pattern in SOURCES for p in sorted((base / folder).rglob(pattern))]
    paths += [base / name for name in SOURCE_FILES]
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(base)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def section_key(run: Run) -> str | None:
    """The key of the run's stored section; None while the run can still change."""
    report_key = reporting.cache_key(run)
    return None if report_key is None else f"{report_key}:{source_digest()}"


@dataclass(frozen=True)
class Section:
    """A stored section cut at its live slots: ``parts`` alternates HTML and a slot's name."""

    parts: tuple[str, ...]
    evidence: dict | None

    @classmethod
    def of(cls, html: str, evidence: dict | None) -> Section:
        return cls(tuple(SLOT.split(html)), evidence)

    def fill(self, live: dict[str, str]) -> SafeString:
        html = "".join(live[part] if i % 2 else part for i, part in enumerate(self.parts))
        return mark_safe(html)  # noqa: S308 - our template's output and escaped values


def live_values(run: Run, *, shared: bool, target_label: str, json_download_url: str) -> dict[str, str]:
    """What the section's live slots show for this request (escaped)."""
    if run.scenario_id is None:
        scenario = "ad hoc"
    else:
        scenario = format_html("{} version {}", run.scenario.name, run.scenario_version or "?")
    ssh_check = ssh_access = ""
    if not shared:  # the shared page links to nothing of the portal
        ssh = reverse("target-ssh", args=[run.target.code])
        check = '<p class="muted"><a href="{}">Check the SSH access of {}</a></p>'
        ssh_check = format_html(check, ssh, target_label)
        ssh_access = format_html(' <a href="{}">SSH access for {}</a>', ssh, target_label)
    return {
        "json_download_url": escape(json_download_url),
        "scenario": scenario,
        "ssh_check": ssh_check,
        "ssh_access": ssh_access,
    }


def render_section(run: Run, live: dict) -> tuple[str, dict | None]:
    """The section's HTML with ``live`` in its slots (``SLOTS``: the slots themselves), and the
    status line's evidence (its badge and the invalid arms, shown above the section)."""
    ctx = pages.report_context(run) | {"run": run, "live": live}
    return render_to_string(TEMPLATE, ctx), ctx.get("evidence")


def store(run: Run) -> Section | None:
    """Render the ended run's section with its slots and store it beside its report (the worker when
    the run ends; a reader when it was stored under another key). None while the run can change."""
    key = section_key(run)
    if key is None:
        return None
    html, evidence = render_section(run, SLOTS)
    fields = {"section": html, "section_key": key, "section_evidence": evidence}
    if not RunReport.objects.filter(run=run, key=reporting.cache_key(run)).update(**fields):
        reporting.materialize(run)  # the report was read from the cache, not stored: store it
        RunReport.objects.filter(run=run).update(**fields)
    return Section.of(html, evidence)


def store_after_end(run: Run) -> None:
    """``store`` for the worker's end of a run (after ``reporting.store_summary``): a failure is
    logged and never breaks the finish; the run's first reader renders the section then."""
    try:
        with transaction.atomic():  # a savepoint: a failure here never breaks the caller's transaction
            store(run)
    except Exception:
        log.exception("run %s: could not render and store its report section", run.code)


def _stored(run: Run, key: str) -> Section:
    """The run's section stored under ``key``: its row (one query), else rendered now and stored."""
    row = RunReport.objects.filter(run_id=run.pk, section_key=key)
    stored = row.values("section", "section_evidence").first()
    if stored is None:  # stored before sections were, or under another release's key
        return store(Run.objects.select_related("target", "scenario").get(pk=run.pk))
    return Section.of(stored["section"], stored["section_evidence"])


def report_section(run: Run, *, shared: bool, json_download_url: str, target_label: str) -> dict:
    """``report_html`` (the section, safe HTML) and ``evidence`` (the status line's badge and the
    invalid arms, which the page shows above the section): an ended run's from its stored section,
    a run still going's rendered now."""
    live = live_values(run, shared=shared, target_label=target_label, json_download_url=json_download_url)
    key = section_key(run)
    if key is None:
        html, evidence = render_section(Run.objects.select_related("target", "scenario").get(pk=run.pk), live)
        return {"report_html": mark_safe(html), "evidence": evidence}  # noqa: S308 - our template's output
    section = _stored(run, key)
    return {"report_html": section.fill(live), "evidence": section.evidence}


def compare_section(runs: list[Run], request, *, shared: bool, extra: dict) -> dict:
    """``compare_html``: the rendered compare body (``templates/runs/_compare_body.html``) of these
    runs in this order, kept once every run has ended. ``extra``: the rest of its context (the
    reader's ``target_labels`` and ``as_reference`` links on the portal's page). The runs' reports,
    their comparison and badges are computed only when the body is rendered."""
    reports = [reporting.cache_key(run) for run in runs]
    key = None
    if all(reports):
        labels = extra.get("target_labels") or {}
        inputs = {
            "shared": shared,
            "reports": reports,
            "labels": [labels.get(run.target.code) for run in runs],
        }
        varies = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]
        key = f"compare-html:{source_digest()}:{varies}"
    html = _cached(key)
    if html is None:
        ctx = pages.compare_context(runs, request) | extra | {"shared": shared}
        html = render_to_string(COMPARE_TEMPLATE, ctx, request)
        _store(key, html)
    return {"compare_html": mark_safe(html)}  # noqa: S308 - our template's output
