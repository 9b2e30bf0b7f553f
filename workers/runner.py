"""Drive one run: claim it, start its probes and engine, store arms as they arrive, finish once.

Shared by the Celery task (``workers.tasks.run_benchmark``) and the CLI (``manage.py tollgate run``).
Every state change of a run is a compare-and-set on its status: a run is claimed only from
``queued`` and finished only from ``running``, so a reaped run is never rewritten to ``succeeded``
and a finished one never to ``failed``, whoever comes second.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal import outbound
from portal.lib import quotas
from portal.lib.protocol import EngineConfig, engine_limit_s
from portal.projects.models import Project
from portal.runs.configs import engine_dict
from portal.runs.live import PROGRESS_TTL_S, cache_delete, cache_set, probing_key, progress_key
from portal.runs.models import GeneratorHost, Run
from portal.runs.quotas import limits_for
from portal.runs.reporting import store_summary
from portal.signing.services import freeze_after_end
from portal.targets import verification
from portal.vault import SecretError
from workers import callbacks
from workers.driver import EngineProcess, Heartbeat
from workers.probes import session as probing

log = logging.getLogger(__name__)

# The reaper fails a run whose heartbeat (every 2 s) has been silent this long.
REAP_AFTER_SILENCE_S = 120.0
# A run waiting for a generator (or its project) is tried again this often.
WAIT_RETRY_S = 10
CLAIMED, WAITING, GONE = "claimed", "waiting", "gone"


def claim(run_id: int, host: str = "") -> str:
    """Move a queued run to running on this generator host, atomically. ``CLAIMED``; ``WAITING`` when
    the host already runs ``TOLLGATE_MAX_RUNS_PER_GENERATOR`` runs or the project its most (the run
    stays queued and says why); ``GONE`` when it is not queued any more (redelivery, cancel)."""
    host = host or socket.gethostname()
    GeneratorHost.objects.get_or_create(host=host)
    with transaction.atomic():
        # Locks the host's row until the commit: claims on one host take turns, so two workers of
        # one host never both see the last free slot.
        GeneratorHost.objects.filter(host=host).update(last_claim=timezone.now())
        run = Run.objects.select_related("project").filter(pk=run_id, status=Run.Status.QUEUED).first()
        if run is None:
            return GONE
        # And the project's row (always after the host's, so two claims never deadlock): hosts take
        # turns on a project's last slot too.
        Project.objects.select_for_update().filter(pk=run.project_id).first()
        reason = _waiting_reason(run, host)
        if reason:
            Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(waiting=reason)
            return WAITING
        now = timezone.now()
        claimed = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(
            status=Run.Status.RUNNING, started=now, heartbeat=now, generator_host=host, waiting=""
        )
    return CLAIMED if claimed else GONE


def _waiting_reason(run: Run, host: str) -> str:
    running = Run.objects.filter(status=Run.Status.RUNNING)
    on_host = running.filter(generator_host=host).count()
    if on_host >= settings.TOLLGATE_MAX_RUNS_PER_GENERATOR:
        return f"waiting for a generator ({on_host} running on {host})"
    in_project = running.filter(project_id=run.project_id).count()
    if in_project >= limits_for(run.project).max_concurrent_runs:
        return f"waiting for a run of project {run.project.name} to end ({in_project} running)"
    return ""


def over_limits(run: Run) -> str:
    """Why the run's config is above its project's limits now (lowered after it was queued), or ""."""
    problems = quotas.check(limits_for(run.project), run.config, run.project.name)
    if not problems:
        return ""
    return "Not started, above the limits of its project: " + " ".join(message for _, message in problems)


def execute_run(run_id: int) -> Run | None:
    """Run a queued run to a terminal state. Returns None when the run was not ours to take, and the
    still queued run when it has to wait (the caller tries again later)."""
    outcome = claim(run_id)
    if outcome == GONE:
        log.info("run %s is not queued any more; skipping", run_id)
        ended = Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED, started__isnull=True).first()
        if ended is not None and not hasattr(ended, "frozen_report"):
            after_end(ended)  # cancelled before it started: nobody else ends it
        return None
    run = Run.objects.select_related("project").get(pk=run_id)
    if outcome == WAITING:
        log.info("run %s: %s", run.code, run.waiting)
        return run
    refused = over_limits(run)
    if refused:
        finish(run, Run.Status.FAILED, refused)
        run.refresh_from_db()
        return run
    try:
        _drive(run)
    except BaseException as exc:
        # Never leave a run "running" behind: record why, then let the error propagate.
        finish(run, Run.Status.FAILED, f"internal error: {type(exc).__name__}: {exc}")
        raise
    run.refresh_from_db()
    return run


def execute_when_free(run_id: int, say: Callable[[str], object] = log.info) -> Run | None:
    """``execute_run``, waiting in this process while the generator or the project is full (the CLI)."""
    run = execute_run(run_id)
    while run is not None and run.status == Run.Status.QUEUED:
        say(f"run {run.code}: {run.waiting}")
        time.sleep(WAIT_RETRY_S)
        run = execute_run(run_id)
    return run


def finish(run: Run, status: str, error: str = "") -> bool:
    """Move the run from running to its terminal state; False (and nothing written) when it is not
    running any more (reaped or cancelled meanwhile: the first verdict stands)."""
    # One transaction: no reader sees the run ended without its summary, budgets and signed report
    # (a CI polling the status would read "succeeded" with nothing to judge).
    with transaction.atomic():
        ended = Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(
            status=status, error=error, finished=timezone.now()
        )
        if ended:
            after_end(run)
    cache_delete(progress_key(run.code), probing_key(run.code))  # best-effort: Redis may be down
    if not ended:
        log.warning("run %s was ended elsewhere; keeping that verdict over %s", run.code, status)
        return False
    return True


def after_end(run: Run) -> None:
    """What follows a run's end, whoever ended it (finish, the reaper, a cancel before it started):
    its summary and stored report, then its frozen, signed report, then its callback when its
    scenario has one (never raises)."""
    store_summary(run)
    freeze_after_end(run)
    callbacks.schedule(run)


def _drive(run: Run) -> None:
    try:
        config = EngineConfig.from_dict(engine_dict(run.config, with_secrets=True))
    except SecretError as exc:
        finish(run, Run.Status.FAILED, f"{exc}: re-enter the credentials (were the keys rotated?).")
        return
    try:
        # Checked again here (the form's answer may be stale) and pinned: the engine connects only to
        # these addresses, so neither a stored URL nor DNS rebinding can point the load elsewhere.
        config.pinned = outbound.pins(arm.url for arm in config.arms)
    except outbound.Refused as exc:
        finish(run, Run.Status.FAILED, f"refused by the outbound address policy: {exc}")
        return
    # Ownership is checked again before every run (docs/outbound-policy.md, "Verification"): until it
    # holds, the verification requests are all that is sent.
    urls = [arm.url for arm in config.arms]
    if verification.origins_needing(urls, config.pinned):
        outcome = verification.verify(run.target, urls, config.pinned)
        if not outcome.verified:
            finish(run, Run.Status.FAILED, f"target not verified, nothing was sent: {outcome.error}")
            return
    engine = EngineProcess(run, config, engine_limit_s(config))
    with Heartbeat(run) as heart:
        heart.on_cancel = engine.cancel
        heart.on_lost = lambda: engine.kill("reaped")
        # Server-side probes connect and start sampling before the load; they never fail the run.
        probes = probing.started(run)
        if probes is not None:
            engine.on_arm = probes.attribute_arm
        try:
            engine.run_to_end()
        finally:
            if probes is not None:
                # Before the run is final: its summary and stored report include what the probes found.
                cache_set(probing_key(run.code), probes.finishing_note(), PROGRESS_TTL_S)
                try:
                    probes.finish()
                except Exception:
                    log.exception("run %s: probes could not finish", run.code)
    finish(run, *engine.verdict())


def reap_stale_runs(max_silence_s: float = REAP_AFTER_SILENCE_S) -> int:
    """Fail runs whose executor stopped sending heartbeats (crashed host, killed worker). Each one
    is a compare-and-set from running, gets its summary (lists and trends show it) and, if its
    executor is alive after all, that executor sees the run lost and stops its engine."""
    cutoff = timezone.now() - timezone.timedelta(seconds=max_silence_s)
    error = (
        f"The worker stopped reporting for more than {max_silence_s:.0f} s (crashed or killed); "
        "finished arms are kept."
    )
    reaped = 0
    stale = Run.objects.filter(status=Run.Status.RUNNING, heartbeat__lt=cutoff).values_list("pk", flat=True)
    for pk in list(stale):
        with transaction.atomic():  # ended together with its summary and signed report, as in finish
            ended = Run.objects.filter(pk=pk, status=Run.Status.RUNNING, heartbeat__lt=cutoff).update(
                status=Run.Status.FAILED, finished=timezone.now(), error=error
            )
            if ended:
                reaped += 1
                after_end(Run.objects.get(pk=pk))
    return reaped
