"""The report section of a run's page (``templates/runs/_report.html``), rendered once per ended run;
and the body of a compare view of ended runs (``templates/runs/_compare_body.html``) the same way.

An ended run's report never changes, and rendering its section (tables of every arm and round, the
chart data as JSON, TLS facts, probes, method) is most of the page's cost. So the run page and the
shared page render it once and keep the HTML in the cache; what differs between readers — the
header with the user's projects and CSRF tokens, the run's actions for the user's role, the share
links, the integrity block (it names the host asked) — is rendered around it on every request.

The cached HTML is keyed by everything it is made of: the stored report's key (run, finish time,
``REPORT_CACHE_VERSION``), a digest of the templates and of the code that shapes the section (a
release that changes either renders anew), and the section's few inputs that are not the report:
the page (run page or shared page), the target's label among the reader's
targets and the run's scenario (its name can change after the run). A run still going is rendered
on every request and never kept.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.html import escape
from django.utils.safestring import mark_safe

from portal.lib.kept import Kept
from portal.runs import pages, reporting
from portal.runs.live import cache_get, cache_set
from portal.runs.models import Run

TEMPLATE = "runs/_report.html"
COMPARE_TEMPLATE = "runs/_compare_body.html"
# Rendered in place of the JSON download link, which is filled in on every request.
JSON_URL_SLOT = "tollgate-json-download-url-slot"
TTL_S = reporting.REPORT_CACHE_TTL_S
# What the section's HTML is made from besides the report: its templates, its filters and the code
# that builds its context (portal/lib holds the evidence, costs and validity wording).
SOURCES = (("templates", "*.html"), ("portal/runs/templatetags", "*.py"), ("portal/lib", "*.py"))
SOURCE_FILES = ("portal/runs/pages.py", "portal/runs/fragments.py")


# The HTML of a key never changes (the key names everything it is made of), so each web process also
# keeps the most recently read ones in memory: no round trip to the cache for a page read all day.
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


def cache_key(run: Run, inputs: dict) -> str | None:
    """The key of the section's HTML for these inputs; None while the run can still change."""
    report_key = reporting.cache_key(run)
    if report_key is None:
        return None
    varies = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]
    return f"report-html:{source_digest()}:{report_key}:{varies}"


def report_section(run: Run, request, *, shared: bool, json_download_url: str, target_label: str) -> dict:
    """``report_html`` (the rendered section, safe HTML) and ``evidence`` (the status line's badge
    and the invalid arms, which the page shows above the section).

    The JSON download link is put in after the cache: on the shared page it holds the link's token,
    a credential that is kept nowhere but hashed (not in the cache either)."""
    scenario = [run.scenario.name, run.scenario_version] if run.scenario_id else None
    key = cache_key(run, {"shared": shared, "label": target_label, "scenario": scenario})
    found = _cached(key)
    if found is None:
        ctx = pages.report_context(run, request)
        ctx |= {
            "run": run,
            "shared": shared,
            "json_download_url": JSON_URL_SLOT,
            "target_label": target_label,
        }
        found = {"html": render_to_string(TEMPLATE, ctx, request), "evidence": ctx.get("evidence")}
        _store(key, found)
    html = found["html"].replace(JSON_URL_SLOT, escape(json_download_url))
    return {"report_html": mark_safe(html), "evidence": found["evidence"]}  # noqa: S308 - our template's output


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
