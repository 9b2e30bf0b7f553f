"""A run's report and a compare view as pages: their template context, shared by the portal's own
pages (``portal.runs.views``) and the read-only shared pages (``portal.sharing``): one computation,
one markup (``templates/runs/_report.html``, ``_compare_body.html``); and what of them is rendered
once and kept.

An ended run's report never changes, and rendering its section (tables of every arm and round, the
chart data as JSON, TLS facts, probes, method) is most of a page's cost. So the worker renders it
when the run ends (``store_after_end``) and stores it in the run's ``RunReport`` row (``section``,
with the status line's evidence), under ``section_key``: the report's key (run, finish time,
``REPORT_CACHE_VERSION``) and ``code_digest``, a digest of the portal's code and templates. A section
stored under another key (a report stored before sections were, a release) is rendered again on its
next view and stored again. A run still going is rendered on every request and never stored.

What can change after the run ended, or differs between the portal's page and the shared page, is
left out of the stored section at its slots (``LIVE``) and filled in per request: the JSON download
link (on the shared page it holds the link's token, a credential kept nowhere but hashed), the
scenario (its name can change) and, on the portal's page only, the links to the target's SSH access
(named by the target's label among the reader's targets).

A slot (``slot``) is an HTML comment, ``<!--slot:name:pk-->``: text of users (target, scenario and
arm names, errors, notes) is escaped in every template, so it can never make one. The run page
(``portal.runs.runpage``) cuts its kept pages at slots of the same kind.

The compare body of ended runs is kept in Django's cache framework (``KEPT``, each web process's own
``pages`` cache) under a key of everything it is made of, and so is the run page.
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
from django.core.cache import caches
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from portal.lib import validity
from portal.lib.report import answers, compare, evidence
from portal.lib.stats import costs
from portal.runs import reporting
from portal.runs.models import Run, RunReport

log = logging.getLogger(__name__)
TEMPLATE = "runs/_report.html"
COMPARE_TEMPLATE = "runs/_compare_body.html"
# Rendered pages and compare bodies, per web process (settings.CACHES["pages"]: in memory, the most
# recent kept): a key names everything its value is made of, so nothing is ever invalidated.
KEPT = "pages"
# The section's slots, filled in per request.
LIVE = ("json_download_url", "scenario", "ssh_check", "ssh_access")
SLOT = re.compile(r"<!--slot:(\w+):(\d*)-->")


def slot(name: str, pk: int | str = "") -> SafeString:
    """Where a value filled in per request goes: ``name`` and, for one of several, its pk."""
    return mark_safe(f"<!--slot:{name}:{pk}-->")  # noqa: S308 - our constants and an integer


@dataclass(frozen=True)
class Slotted:
    """Rendered HTML cut at its slots, as text (a section, filled into a page) or as UTF-8 (a kept
    page, filled into a response): filling it in is joining its parts."""

    parts: tuple[str, ...] | tuple[bytes, ...]  # the text between the slots: one more than the slots
    slots: tuple[tuple[str, str], ...]  # (name, pk or "")

    @classmethod
    def of(cls, html: str, *, encoded: bool = False) -> Slotted:
        cut = SLOT.split(html)
        parts = tuple(part.encode() for part in cut[::3]) if encoded else tuple(cut[::3])
        return cls(parts, tuple(zip(cut[1::3], cut[2::3], strict=True)))

    def fill(self, values: dict[tuple[str, str], str]) -> SafeString | bytes:
        """The HTML with each slot's value (escaped by the caller), a slot without one left empty."""
        encoded = isinstance(self.parts[0], bytes)
        out = [self.parts[0]]
        for where, part in zip(self.slots, self.parts[1:], strict=True):
            value = values.get(where, "")
            out += (value.encode() if encoded else value, part)
        if encoded:
            return b"".join(out)
        return mark_safe("".join(out))  # noqa: S308 - our templates' output and escaped values


@functools.cache
def code_digest() -> str:
    """A digest of the portal's code and templates, read once per process: a release that changes
    what a page is made of renders its pages and sections anew."""
    base = Path(settings.BASE_DIR)
    digest = hashlib.sha256()
    for path in sorted([*(base / "portal").rglob("*.py"), *(base / "templates").rglob("*.html")]):
        digest.update(str(path.relative_to(base)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


COST_LABELS = answers.WORDS


def report_context(run: Run, request=None) -> dict:
    """What templates/runs/_report.html needs: empty of ``report`` while the run has no arm yet."""
    ctx: dict = {"cost_labels": COST_LABELS}
    page = reporting.report_page(run, request)
    data = page["report"]
    ctx["budgets"] = data.get("budgets")  # templates/runs/_budgets.html
    if data["arms"]:
        ctx["report"] = data
        ctx["arm_rows"] = [
            (name, section, data["deltas"].get(name)) for name, section in data["arms"].items()
        ]
        ctx["cut_short"] = [name for name, section in data["arms"].items() if not section["complete"]]
        ctx["lost_generators"] = [g["id"] for g in data.get("generators") or [] if g["lost_at"] is not None]
        ctx["chart"] = page["charts"]
        cpu = {c["name"]: c for c in data["costs"] if c["metric"] == "server_cpu_ms_per_req"}
        ctx["headline"] = [
            {
                **cost,
                "label": COST_LABELS.get(cost["name"], cost["name"]),
                "server_cpu": cpu.get(cost["name"]),
            }
            for cost in costs.headline_costs(data["costs"])
        ]
        ctx["refused_arms"] = data["run"].get("refused_arms") or []
        ctx["evidence"] = evidence_context(run, data)
        ctx["expected_label"] = validity.expected_label(run.config.get("expected_status") or [])
    return ctx


def evidence_context(run: Run, data: dict) -> dict:
    """The status line's badge (checks that warned or failed) and the arms that are invalid; which
    costs that leaves unjudged or warned is in the headline sentence."""
    invalid = data["run"].get("invalid_arms") or {}
    return {
        "badge": evidence.status_badge(run.status, data["run"].get("checks"), list(invalid)),
        "invalid": invalid,
    }


def compare_context(runs: list[Run], request=None) -> dict:
    """What templates/runs/_compare_body.html needs for ``runs`` (run 1 the reference), badges set
    on the runs; ``data`` is also the compare JSON."""
    pages = [reporting.report_page(run, request) for run in runs]
    reports = [page["report"] for page in pages]
    data = compare.compare(reports)
    for run, found in zip(runs, reports, strict=True):
        run.badge = evidence.status_badge(
            run.status, found["run"].get("checks"), list(found["run"].get("invalid_arms") or {})
        )
    chart = {
        "runs": [f"{i + 1}: {run.created:%Y-%m-%d %H:%M}" for i, run in enumerate(runs)],
        "costs": data["costs"],
        "curves": [page["charts"].get("curve", {}) for page in pages],
    }
    return {"runs": runs, "data": data, "chart": chart, "cost_labels": COST_LABELS}


def section_key(run: Run) -> str | None:
    """The key of the run's stored section; None while the run can still change."""
    report_key = reporting.cache_key(run)
    return None if report_key is None else f"{report_key}:{code_digest()}"


@dataclass(frozen=True)
class Section:
    """A stored section cut at its slots, with the status line's evidence."""

    html: Slotted
    evidence: dict | None

    def fill(self, live: dict[str, str]) -> SafeString:
        return self.html.fill({(name, ""): value for name, value in live.items()})


def live_values(run: Run, *, shared: bool, target_label: str, json_download_url: str) -> dict[str, str]:
    """What the section's slots show for this request (escaped)."""
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
    ctx = report_context(run) | {"run": run, "live": live}
    return render_to_string(TEMPLATE, ctx), ctx.get("evidence")


SLOTS = {name: slot(name) for name in LIVE}


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
    return Section(Slotted.of(html), evidence)


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
    return Section(Slotted.of(stored["section"]), stored["section_evidence"])


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
        key = f"compare-html:{code_digest()}:{varies}"
    html = None if key is None else caches[KEPT].get(key)
    if html is None:
        ctx = compare_context(runs, request) | extra | {"shared": shared}
        html = render_to_string(COMPARE_TEMPLATE, ctx, request)
        if key is not None:
            caches[KEPT].set(key, html)
    return {"compare_html": mark_safe(html)}  # noqa: S308 - our template's output
