"""Adapter from models to the pure report functions in portal.lib.report.report (and its chart data,
portal.lib.report.charts)."""

from __future__ import annotations

import json
import logging
import time

from django.conf import settings
from django.db import transaction
from django.urls import reverse

import portal
from portal.lib.report import answers, budgets, report
from portal.lib.report.charts import histogram_overlay, percentile_curve
from portal.lib.stats import costs, hdr
from portal.runs.configs import public_config
from portal.runs.live import cache_get, cache_set
from portal.runs.models import ArmResult, Run, RunReport

log = logging.getLogger(__name__)


def arm_data(arm: ArmResult) -> dict:
    return {
        "arm": arm.arm,
        "round": arm.round,
        "url": arm.url,
        "requested_url": arm.requested_url,
        "targets": arm.targets,
        "redirects": arm.redirects,
        "complete": arm.complete,
        "stopped": arm.stopped,
        "users": arm.users,
        "warmup_s": arm.warmup_s,
        "warmup_requests": arm.warmup_requests,
        "unwindowed_requests": arm.unwindowed_requests,
        "requests": arm.requests,
        "failures": arm.failures,
        "duration_s": arm.duration_s,
        "rps": arm.rps,
        "hist": {
            "ttfb_us": arm.ttfb_hist,
            "ttlb_us": arm.ttlb_hist,
            "connect_us": arm.connect_hist,
            "tls_handshake_us": arm.tls_handshake_hist,
        },
        "status_codes": arm.status_codes,
        "response_bytes_min": arm.response_bytes_min,
        "response_bytes_max": arm.response_bytes_max,
        "connections_opened": arm.connections_opened,
        "connections_reopened": arm.connections_reopened,
        "tls_sessions_reused": arm.tls_sessions_reused,
        "errors": arm.errors,
        "sizes_by_url": arm.sizes_by_url,
        "content_by_url": arm.content_by_url,
        "late_requests": arm.late_requests,
        "max_schedule_lag_us": arm.max_schedule_lag_us,
        "series": arm.series,
        "server_cpu": arm.server_cpu,
        "generators": arm.generators,
        "http2": arm.http2,
        "quic": arm.quic,
    }


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def report_url(run: Run, request=None) -> str:
    path = reverse("runs-detail", args=[run.code])
    return request.build_absolute_uri(path) if request is not None else settings.TOLLGATE_BASE_URL + path


def scenario_data(run: Run) -> dict | None:
    """The saved scenario a run was started from and the version it ran (None: an ad hoc run), so the
    frozen, signed report states which recipe it measured, not only its config."""
    if run.scenario_id is None:
        return None
    return {"id": str(run.scenario.code), "name": run.scenario.name, "version": run.scenario_version}


def run_data(run: Run, request=None) -> dict:
    return {
        "id": str(run.code),
        "status": run.status,
        "error": run.error or None,
        "report_url": report_url(run, request),
        "target": {
            "name": run.target.name,
            "plain_url": run.target.plain_url,
            "tls_url": run.target.tls_url,
            # The Server header each URL answered with (null: a run from before it was recorded).
            "server_software": run.server_software or None,
        },
        "config": public_config(run.config),
        "config_hash": report.config_hash(public_config(run.config)),
        "tollgate": portal.__version__,
        "engine": run.engine,
        "source": run.source,
        "scenario": scenario_data(run),
        "created": _iso(run.created),
        "started": _iso(run.started),
        "finished": _iso(run.finished),
        # Who measured what: one entry per attempt (a resumed run has several), with its worker, host,
        # times, the arms it stored ("arm#round"), arms it left cut short, outcome and reason.
        "attempts": [attempt.entry() for attempt in run.attempts.all()],
        # Arms refused in the preflight (the server does not speak their protocol): not measured.
        "refused_arms": run.refused_arms,
    }


def arms_of(run: Run) -> list[dict]:
    return [arm_data(arm) for arm in run.arms.all()]


def measured_nothing(run: Run) -> str:
    """Why none of the run's stored arms measured the page ("no arm measured the page: 404 × 1,200
    on every arm"), or "" when one did (``portal.lib.report.report.measured_nothing``)."""
    return report.measured_nothing(public_config(run.config), arms_of(run)) or ""


def unanswered(run: Run) -> str:
    """Why the run answered none of the costs it asked for ("no cost could be computed — plain arm
    refused: …"), or "" when it answered one (``portal.lib.report.answers.unanswered``)."""
    rows = run_report(run, arms=arms_of(run))["answers"]
    return answers.unanswered(rows) or ""


def run_report(run: Run, request=None, arms: list[dict] | None = None) -> dict:
    if arms is None:
        return report_page(run, request)["report"]
    return with_budgets(
        run,
        report.build_report(
            run_data(run, request),
            arms,
            run.tls_info or None,
            run.probes or None,
            run.variants or None,
            run.capacity or None,
        ),
    )


def with_budgets(run: Run, data: dict) -> dict:
    """The report with its budget verdicts (``portal.lib.report.budgets``) under ``"budgets"``: null for a
    run without budgets. Part of the report, so the frozen, signed report carries them."""
    limits = (run.config or {}).get("budgets")
    try:
        data["budgets"] = budgets.evaluate(data, limits) if limits else None
    except budgets.BudgetError as exc:  # checked when the run was made; never break a report over it
        data["budgets"] = {"status": budgets.SKIP, "results": [], "detail": str(exc)}
    return data


# Bump when the report's computation changes, so cached reports of finished runs are rebuilt.
# 12: attempts, 13: direction, 14: no credential names, 15: the post-quantum hybrid's price,
# 16: the server software, 18: the answer table, no verdict without an interval
REPORT_CACHE_VERSION = f"{portal.__version__}:{report.SCHEMA}:18"
REPORT_CACHE_TTL_S = 7 * 24 * 3600


def cache_key(run: Run) -> str | None:
    """The key of an ended run's stored report (None while the run can still change)."""
    if not run.is_terminal or run.finished is None:
        return None  # still changing
    return f"report:{REPORT_CACHE_VERSION}:{run.code}:{run.finished.timestamp()}"


def _build_page(run: Run, request=None) -> dict:
    rows = arms_of(run)
    data = report.build_report(
        run_data(run, request),
        rows,
        run.tls_info or None,
        run.probes or None,
        run.variants or None,
        run.capacity or None,
    )
    with_budgets(run, data)
    charts = {}
    if rows:
        charts = {
            "ttlb": histogram_overlay(rows, "ttlb_us"),
            "ttfb": histogram_overlay(rows, "ttfb_us"),
            "curve": {
                name: percentile_curve(hdr.decode(section["hdr"]["ttlb_us"]))
                for name, section in data["arms"].items()
            },
            "series": {
                name: {
                    "p50_us": [p.get("p50_us") for p in section["series"]],
                    "p95_us": [p.get("p95_us") for p in section["series"]],
                    "requests": [p.get("requests") for p in section["series"]],
                    "gen_cpu_pct": [p.get("gen_cpu_pct") for p in section["series"]],
                }
                for name, section in data["arms"].items()
            },
            "breakdown": {name: section["breakdown"] for name, section in data["arms"].items()},
            "projection": data.get("projection"),
            "server_cpu": {
                name: {
                    "cpu_pct": [p["cpu_pct"] for p in arm["timeline"]],
                    "ma15": arm["cpu_pct_ma15"],
                    "host_cpu_pct": [p["host_cpu_pct"] for p in arm["timeline"]],
                }
                for name, arm in ((data.get("probes") or {}).get("server_cpu") or {}).items()
            },
        }
    return {"report": data, "charts": charts}


def materialize(run: Run, request=None, key: str | None = None) -> dict:
    """Compute a run's report page from its histograms; once the run has ended, store it (database
    and cache). Reached through ``report_page`` (the worker's ``summarize`` when a run ends), so
    readers find it ready."""
    key = key if key is not None else cache_key(run)
    began = time.perf_counter()
    page = _build_page(run, request)
    if key:
        computed_ms = round((time.perf_counter() - began) * 1000.0, 1)
        # The section rendered from the page it replaces is stale with it (portal.runs.pages).
        stale = {"section": "", "section_key": "", "section_evidence": None}
        RunReport.objects.update_or_create(
            run=run, defaults={"key": key, "page": page, "computed_ms": computed_ms, **stale}
        )
        cache_set(key, page, REPORT_CACHE_TTL_S)  # best-effort: the stored RunReport is the record
    return page


def report_page(run: Run, request=None) -> dict:
    """The report and the chart data of a run; cached once the run has ended (it cannot change)."""
    key = cache_key(run)
    page = cache_get(key) if key else None
    if page is None and key:
        stored = RunReport.objects.filter(run_id=run.pk, key=key).values_list("page", flat=True).first()
        if stored is not None:
            page = stored
            cache_set(key, page, REPORT_CACHE_TTL_S)
    if page is None:
        page = materialize(run, request, key)
    # The link depends on how the page was reached; never serve a cached host.
    data = dict(page["report"])
    data["run"] = {**data["run"], "report_url": report_url(run, request)}
    return {"report": data, "charts": page["charts"]}


def summarize(run: Run) -> dict:
    """What lists and trends show of a run, stored on it when it ends."""
    data = report_page(run)["report"]
    return {
        "requests": sum(arm["requests"] for arm in data["arms"].values()),
        "arms": list(data["arms"]),
        "costs": [
            {
                **{
                    k: cost[k]
                    for k in ("name", "delta", "delta_pct", "ci95", "verdict", "arm_value", "base_value")
                },
                "unconfirmed": cost.get("unconfirmed"),
                # Summaries stored before these were kept derive them (verdicts.verdict_words).
                "direction": cost.get("direction"),
                "unexpected": cost.get("unexpected", False),
                "not_judged": cost.get("not_judged"),
                "warnings": sorted({w["check"] for w in cost.get("warnings") or []}),
            }
            for cost in costs.headline_costs(data["costs"])
        ],
        "validity": {v["check"]: v["status"] for v in data["validity"]},
        # For the status badge of lists and compare pages, without computing reports.
        "checks": data["run"].get("checks"),
        "invalid_arms": list(data["run"].get("invalid_arms") or {}),
        "headline": data["headline"],
        # The answer table in one sentence per row (callbacks, lists): portal.lib.report.answers.
        "answers": [
            {"key": row["key"], "verdict": row["verdict"], "text": row["text"]}
            for row in data.get("answers") or []
        ],
        # {"status", "results"} or None (no budgets): read by lists, callbacks and the API.
        "budgets": data.get("budgets"),
    }


def export_report(run: Run, request=None) -> dict:
    """The report JSON as downloaded (page, CLI, API, share link). Once the run has ended this is its
    frozen, signed report (``portal.signing``), else the live report. The frozen one is reached by
    its reverse accessor: runs never imports signing."""
    frozen = getattr(run, "frozen_report", None)
    if frozen is not None:
        return json.loads(frozen.body)
    return run_report(run, request)


def store_summary(run: Run) -> None:
    """When a run has ended (finished or reaped): compute its report once, store it with the run's
    summary, so readers and lists find them ready (then ``pages.store_after_end`` stores its
    page's report section)."""
    run.refresh_from_db()
    try:
        with transaction.atomic():  # a savepoint: a failure never breaks the caller's transaction
            if run.arms.exists():
                Run.objects.filter(pk=run.pk).update(summary=summarize(run))
    except Exception:  # a convenience; the run's own record is already final
        log.exception("run %s: could not summarize or store its report", run.code)
