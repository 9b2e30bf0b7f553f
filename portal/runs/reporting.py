"""Adapter from models to the pure report functions in portal.lib.report."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from portal.lib import report
from portal.runs.models import ArmResult, Run


def arm_data(arm: ArmResult) -> dict:
    return {
        "arm": arm.arm,
        "url": arm.url,
        "complete": arm.complete,
        "users": arm.users,
        "warmup_s": arm.warmup_s,
        "warmup_requests": arm.warmup_requests,
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
        "tls_sessions_reused": arm.tls_sessions_reused,
        "errors": arm.errors,
    }


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def report_url(run: Run, request=None) -> str:
    path = reverse("runs-detail", args=[run.code])
    return request.build_absolute_uri(path) if request is not None else settings.TOLLGATE_BASE_URL + path


def run_data(run: Run, request=None) -> dict:
    return {
        "id": str(run.code),
        "status": run.status,
        "error": run.error or None,
        "report_url": report_url(run, request),
        "target": {"name": run.target.name, "plain_url": run.target.plain_url, "tls_url": run.target.tls_url},
        "config": run.config,
        "engine": run.engine,
        "source": run.source,
        "created": _iso(run.created),
        "started": _iso(run.started),
        "finished": _iso(run.finished),
    }


def arms_of(run: Run) -> list[dict]:
    return [arm_data(arm) for arm in run.arms.all()]


def run_report(run: Run, request=None, arms: list[dict] | None = None) -> dict:
    return report.build_report(run_data(run, request), arms if arms is not None else arms_of(run))
