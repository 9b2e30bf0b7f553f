"""Arms as stored: one ArmResult per arm and round the engine reported, written by the executor of
the run's open attempt only, after the arms already stored."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.db import transaction

from portal.runs.models import ArmResult, Run, RunAttempt

log = logging.getLogger(__name__)


def _aware(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, tz=UTC)


def store_arm(attempt: RunAttempt, message: dict) -> ArmResult | None:
    """Store one arm the engine reported, after the arms already stored (a resumption's included);
    None when ``attempt`` has ended (its run's new executor measures the arm itself). The run's row is
    locked first, as wherever an attempt is closed, so none closes while the arm is written."""
    run = attempt.run
    with transaction.atomic():
        running = Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.RUNNING).exists()
        if not running or not RunAttempt.objects.filter(pk=attempt.pk, ended__isnull=True).exists():
            log.warning("run %s: not this attempt's any more; arm %s not stored", run.code, message["arm"])
            return None
        return _create_arm(attempt, ArmResult.objects.filter(run=run).count(), message)


def _create_arm(attempt: RunAttempt, position: int, message: dict) -> ArmResult:
    result = message["result"]
    hist = result["hist"]
    return ArmResult.objects.create(
        run=attempt.run,
        worker=attempt.worker,
        attempt=attempt.number,
        arm=message["arm"],
        round=message.get("round", 0),
        position=position,
        url=message["url"],
        requested_url=message.get("requested_url", message["url"]),
        targets=message.get("targets", []),
        redirects=message.get("redirects", []),
        complete=result["complete"],
        stopped=(result.get("stopped") or "")[:300],
        users=result["users"],
        warmup_s=result["warmup_s"],
        warmup_requests=result["warmup_requests"],
        unwindowed_requests=result.get("unwindowed_requests", 0),
        duration_s=result["measured_s"],
        requests=result["requests"],
        failures=result["failures"],
        rps=result["rps"],
        ttfb_hist=hist["ttfb_us"] or "",
        ttlb_hist=hist["ttlb_us"] or "",
        connect_hist=hist["connect_us"] or "",
        tls_handshake_hist=hist["tls_handshake_us"] or "",
        status_codes=result["status_codes"],
        response_bytes_min=result["response_bytes"]["min"],
        response_bytes_max=result["response_bytes"]["max"],
        sizes_by_url=result["sizes_by_url"],
        content_by_url=result.get("content_by_url", {}),
        errors=result["errors"],
        connections_opened=result["connections_opened"],
        connections_reopened=result.get("connections_reopened"),
        tls_sessions_reused=result["tls_sessions_reused"],
        window_started=result.get("window_started_at"),
        window_ended=result.get("window_ended_at"),
        late_requests=result.get("late_requests", 0),
        max_schedule_lag_us=result.get("max_schedule_lag_us", 0),
        series=result["series"],
        generators=result.get("generators", []),
        http2=result.get("http2"),
        quic=result.get("quic"),
        started=_aware(result["started_at"]),
        finished=_aware(result["finished_at"]),
    )


def kept_arms(run: Run) -> str:
    """`` Kept 2 finished arm(s) and 1 arm(s) cut short (tls_new).``: an arm a cancel cut short is
    never called finished."""
    rows = list(ArmResult.objects.filter(run=run).order_by("position").values_list("arm", "complete"))
    finished = sum(1 for _, complete in rows if complete)
    short = [arm for arm, complete in rows if not complete]
    parts = [f"{finished} finished arm(s)"] if finished else []
    if short:
        parts.append(f"{len(short)} arm(s) cut short ({', '.join(short)})")
    return f" Kept {' and '.join(parts)}." if parts else ""
