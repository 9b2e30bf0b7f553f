"""Drive one run: claim it, start its probes and engine, store arms as they arrive, finish once.

Shared by the Celery task (``workers.tasks.run_benchmark``) and the CLI (``manage.py tollgate run``).
Every state change of a run is a compare-and-set on its status and on its attempt's row
(``RunAttempt``) still being open: a run is claimed only from ``queued`` (or from ``running`` when its
executor is lost, ``workers.attempts``) and finished only from ``running`` by the executor of its open
attempt, so a resumed run is never ended by the executor that lost it, a finished one never
rewritten, whoever comes second.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from portal import outbound
from portal.lib.runs import quotas
from portal.lib.runs.protocol import EngineConfig, engine_limit_s, run_limit_s
from portal.projects.models import Project
from portal.runs import live, pages
from portal.runs.configs import engine_dict
from portal.runs.live import PROGRESS_TTL_S, cache_delete, cache_set, probing_key, progress_key
from portal.runs.models import GeneratorHost, Run, RunAttempt
from portal.runs.quotas import limits_for
from portal.runs.reporting import measured_nothing, store_summary, unanswered
from portal.signing.services import freeze_after_end
from portal.targets import verification
from portal.vault import SecretError
from workers import attempts, callbacks, slots, storage, watch
from workers.arms import kept_arms
from workers.driver import EngineProcess, Heartbeat
from workers.probes import session as probing

log = logging.getLogger(__name__)

# A claimed attempt must end within its run limit plus this (RunAttempt.deadline); past it, the reaper acts.
DEADLINE_MARGIN_S = 60.0
CLAIMED, WAITING, GONE = "claimed", "waiting", "gone"


def claim(
    run_id: int,
    host: str = "",
    worker: str = "",
    say: Callable[[str], object] | None = None,
    waiting_since: datetime | None = None,
) -> str:
    """Move a queued run to running on this generator host, atomically, as a new attempt; a running
    run whose executor is lost (``attempts.executor_lost``) is taken over the same way, its lost
    attempt closed and its finished arms kept. ``CLAIMED``; ``WAITING`` when the host or the project
    has no free slot (``slots.waiting_reason``: the run stays queued and says why); ``GONE`` when it
    is not ours to take (ended, cancelled, running elsewhere), or failed for having waited since
    ``waiting_since`` for ``TOLLGATE_GENERATOR_WAIT_S``. A slot held by a run the reaper would call
    lost is freed first (``_end_dead_holders``; ``say`` hears how, the log otherwise)."""
    host = host or socket.gethostname()
    GeneratorHost.objects.get_or_create(host=host)
    with transaction.atomic():
        # Locks the host's row until the commit: claims on one host take turns, so two workers of
        # one host never both see the last free slot.
        GeneratorHost.objects.filter(host=host).update(last_claim=timezone.now())
        run = Run.objects.select_related("project").filter(pk=run_id).first()
        if run is None or run.status not in (Run.Status.QUEUED, Run.Status.RUNNING):
            return GONE
        lost = None
        if run.status == Run.Status.RUNNING:
            lost = attempts.current(run)
            if not attempts.executor_lost(lost, host):
                return GONE
        # And the project's row (always after the host's, so two claims never deadlock): hosts take
        # turns on a project's last slot too.
        Project.objects.select_for_update().filter(pk=run.project_id).first()
        wait = slots.waiting_reason(run, host)
        if wait and _end_dead_holders(run, host, say or log.warning):
            wait = slots.waiting_reason(run, host)
        if wait:
            return _keep_waiting(run, *wait, waiting_since)
        return _take(run, lost, host, worker)


def _take(run: Run, lost: RunAttempt | None, host: str, worker: str) -> str:
    """Under the host's and project's locks: the run's row locked in the state it was read in, the
    lost executor's attempt closed, a new one opened."""
    if not Run.objects.select_for_update().filter(pk=run.pk, status=run.status).exists():
        return GONE
    if lost is not None and not attempts.close(lost, "lost", attempts.lost_reason(lost, "lost")):
        return GONE
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started=run.started or now, waiting="")
    limit_s = run_limit_s(EngineConfig.from_dict(engine_dict(run.config)), run.config.get("probes"))
    attempts.begin(run, attempts.executor_name(worker), host, now, limit_s + DEADLINE_MARGIN_S)
    return CLAIMED


def _keep_waiting(run: Run, reason: str, give_up: str, waiting_since: datetime | None) -> str:
    """The run stays queued and says why (``WAITING``), or, waiting since ``waiting_since`` for
    ``TOLLGATE_GENERATOR_WAIT_S`` already, fails saying who held the slot (``GONE``)."""
    if waiting_since is not None and run.status == Run.Status.QUEUED:
        until = waiting_since + timedelta(seconds=settings.TOLLGATE_GENERATOR_WAIT_S)
        if timezone.now() >= until:
            fail_unresumed(run, Run.Status.QUEUED, f"Not started: {give_up}", attempts.last(run))
            return GONE
        reason = f"{reason}; tried until {until:%H:%M UTC}"
    Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(waiting=reason[:300])
    return WAITING


def _end_dead_holders(run: Run, host: str, say: Callable[[str], object]) -> int:
    """The runs holding the slots ``run`` waits for (on this host, or of its project) whose executor
    the reaper would call lost (``attempts.stale``), ended as the reaper ends them (``reap``): with no
    maintenance worker (a bare host, the CLI alone) nothing else would, and every later run would wait
    for ever. Each is put back in the queue when a worker consuming the runs queue is present to
    resume it, else failed (nobody would take it). Called under the host's and project's row locks."""
    silence_s = settings.TOLLGATE_REAP_SILENCE_S
    now = timezone.now()
    holders = attempts.open_of_running().exclude(run=run).filter(Q(host=host) | Q(run__project=run.project))
    resumable = None
    ended = 0
    for dead in list(attempts.stale(holders, silence_s, now)):
        if resumable is None:
            resumable = live.runs_workers_present(now)
        found = f"found dead by run {run.code}, which waited for its slot on {host}"
        outcome = reap(dead, silence_s, now, resumable=resumable, found=found)
        if outcome:
            ended += 1
            say(f"run {run.code}: found run {dead.run.code} dead on {dead.host}; {outcome}")
    return ended


def over_limits(run: Run) -> str:
    """Why the run's config is above its project's limits now (lowered after it was queued), or ""."""
    problems = quotas.check(limits_for(run.project), run.config, run.project.name)
    if not problems:
        return ""
    return "Not started, above the limits of its project: " + " ".join(message for _, message in problems)


def execute_run(
    run_id: int,
    worker: str = "",
    say: Callable[[str], object] | None = None,
    waiting_since: datetime | None = None,
) -> Run | None:
    """Run a queued run (or take over one whose executor is lost) to a terminal state, or hand it
    back. Returns None when the run was not ours to take, and the still queued run when it has to
    wait (the caller tries again later, passing when it first waited as ``waiting_since``: the wait
    is bounded, ``claim``). ``worker``: the Celery node name executing it; ``say``: where the claim
    reports a dead run it ended (the log by default)."""
    outcome = claim(run_id, worker=worker, say=say, waiting_since=waiting_since)
    if outcome == GONE:
        log.info("run %s is not ours to run (ended, or running elsewhere); skipping", run_id)
        ended = Run.objects.filter(pk=run_id, status=Run.Status.CANCELLED).first()
        if ended is not None and not hasattr(ended, "frozen_report"):
            after_end(ended)  # cancelled while queued (before it started, or resumed): nobody else ends it
        return None
    run = Run.objects.select_related("project").get(pk=run_id)
    if outcome == WAITING:
        log.info("run %s: %s", run.code, run.waiting)
        return run
    attempt = attempts.current(run)
    refused = over_limits(run)
    if refused:
        finish(run, Run.Status.FAILED, refused, attempt=attempt)
        run.refresh_from_db()
        return run
    try:
        _drive(run, attempt)
    except BaseException as exc:
        # Never leave a run "running" behind: record why, then let the error propagate.
        finish(run, Run.Status.FAILED, f"internal error: {type(exc).__name__}: {exc}", attempt=attempt)
        raise
    run.refresh_from_db()
    # Handed back (or resumed elsewhere meanwhile): its task was sent again, nothing more to do here.
    return None if run.status in (Run.Status.QUEUED, Run.Status.RUNNING) else run


def execute_when_free(run_id: int, say: Callable[[str], object] = log.info) -> Run | None:
    """``execute_run``, waiting in this process while the generator or the project is full (the CLI)."""
    run = execute_run(run_id, say=say)
    since = None
    while run is not None and run.status == Run.Status.QUEUED:
        since = since or timezone.now()
        say(f"run {run.code}: {run.waiting}")
        time.sleep(slots.WAIT_RETRY_S)  # a loop in this process, not the broker; bounded as the task's
        run = execute_run(run_id, say=say, waiting_since=since)
    if run is None:  # not this process's to end any more (ended or resumed by a worker): as it stands
        run = Run.objects.filter(pk=run_id).first()
        if run is not None and not run.is_terminal:
            attempt = attempts.current(run)
            where = run.waiting or (attempt.worker if attempt else "")
            say(f"run {run.code}: {run.status} elsewhere ({where})")
    return run


def finish(
    run: Run,
    status: str,
    error: str = "",
    preflight_failed: bool = False,
    attempt: RunAttempt | None = None,
) -> bool:
    """Move the run from running to its terminal state, closing ``attempt`` (its executor's; None:
    whichever is open, for a run ended from outside); False (and nothing written) when the run is not
    running or that attempt has ended (reaped, resumed elsewhere or cancelled meanwhile: the first
    verdict stands). Retried while the database is unreachable (``storage.retrying``).
    ``preflight_failed``: stopped before any load, nothing measured (``Run.preflight_failed``)."""

    def end() -> int:
        # One transaction: no reader sees the run ended without its summary, budgets and signed
        # report (a CI polling the status would read "succeeded" with nothing to judge).
        with transaction.atomic():
            current = Run.objects.select_for_update().filter(pk=run.pk, status=Run.Status.RUNNING).first()
            if current is None:
                return 0
            mine = attempt if attempt is not None else attempts.current(current)
            if mine is not None and not attempts.close(mine, status, error):
                return 0
            Run.objects.filter(pk=run.pk).update(
                status=status, error=error, finished=timezone.now(), preflight_failed=preflight_failed
            )
            after_end(current)
            return 1

    ended = storage.retrying(end, f"finishing run {run.code}")
    cache_delete(progress_key(run.code), probing_key(run.code))
    if not ended:
        log.warning("run %s was ended elsewhere; keeping that verdict over %s", run.code, status)
        return False
    return True


def after_end(run: Run) -> None:
    """What follows a run's end, whoever ended it (finish, the reaper, a cancel before it started):
    its summary and stored report with its page's report section, then its frozen, signed report,
    then its callback when its scenario has one, and its judgement against the baseline (never
    raises)."""
    store_summary(run)
    pages.store_after_end(run)
    freeze_after_end(run)
    callbacks.schedule(run)
    watch.schedule(run)


def _checked_config(run: Run) -> tuple[EngineConfig | None, str]:
    """The run's engine config, its secrets opened and its addresses pinned; or why it may not be
    sent (nothing was)."""
    try:
        config = EngineConfig.from_dict(engine_dict(run.config, with_secrets=True))
    except SecretError as exc:
        return None, f"{exc}: re-enter the credentials (were the keys rotated?)."
    try:
        # Checked again here (the form's answer may be stale) and pinned: the engine connects only to
        # these addresses, so neither a stored URL nor DNS rebinding can point the load elsewhere.
        config.pinned = outbound.pins(arm.url for arm in config.arms)
    except outbound.Refused as exc:
        return None, f"refused by the outbound address policy: {exc}"
    # Ownership is checked again before every run (docs/outbound-policy.md, "Verification"): until it
    # holds, the verification requests are all that is sent.
    urls = [arm.url for arm in config.arms]
    if verification.origins_needing(urls, config.pinned):
        outcome = verification.verify(run.target, urls, config.pinned)
        if not outcome.verified:
            return None, f"target not verified, nothing was sent: {outcome.error}"
    return config, ""


def _drive(run: Run, attempt: RunAttempt) -> None:
    config, refused = _checked_config(run)
    if config is None:
        finish(run, Run.Status.FAILED, refused, attempt=attempt)
        return
    if attempt.number > 1:
        # A resumption: the finished arms stay, the engine measures the rest (the arm that was in
        # progress again) and the saturation search, if any, from its start.
        attempts.clear_partial(run)
        config.skip = attempts.arm_keys(run)
        Run.objects.filter(pk=run.pk).update(capacity={})
    engine = EngineProcess(run, config, engine_limit_s(config), attempt)
    with Heartbeat(run, attempt) as heart:
        heart.on_cancel = engine.cancel
        heart.on_handback = engine.cancel
        heart.on_lost = lambda: engine.kill("reaped")
        heart.current_arm = engine.current_arm
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
                    # Handing back: no one-shot benchmarks, the worker has seconds to let go; nor after
                    # a preflight that stopped the run (nothing measured: it ends at once).
                    stopped = "the preflight stopped the run" if engine.stopped_in_preflight() else ""
                    probes.finish(one_shots=not heart.handing_back, not_run=stopped)
                except Exception:
                    log.exception("run %s: probes could not finish", run.code)
    engine.flush(storage.DB_RETRY_S)
    if heart.lost:
        log.warning("run %s: no longer this attempt's; its new executor ends it", run.code)
    elif heart.handing_back:
        attempt.refresh_from_db(fields=["current_arm", "heartbeat"])
        reason = attempts.lost_reason(attempt, "was asked to stop") + "; handed back"
        attempts.requeue(attempt, "handed back", reason)
    else:
        finish(run, *verdict(run, engine), preflight_failed=engine.stopped_in_preflight(), attempt=attempt)


def verdict(run: Run, engine: EngineProcess) -> tuple[str, str]:
    """The run's terminal (status, error): the engine's, except that a run none of whose arms
    measured the page is no success although the engine finished: it fails with what the arms got
    instead (its arms are kept and reported); and one that measured but answered none of the costs
    it asked for (their arms refused or invalid) is ``incomplete``, saying why."""
    status, error = engine.verdict()
    if status != Run.Status.SUCCEEDED:
        return status, error
    run.refresh_from_db()  # what the engine's messages stored meanwhile (refused arms, TLS facts)
    nothing = measured_nothing(run)
    if nothing:
        return Run.Status.FAILED, nothing
    why = unanswered(run)
    return (Run.Status.INCOMPLETE, why[0].upper() + why[1:]) if why else (status, error)


def reap_stale_runs(max_silence_s: float | None = None) -> int:
    """The reaper (Celery beat, every ``TOLLGATE_REAP_EVERY_S``). A running run whose executor is
    silent for ``max_silence_s`` (``TOLLGATE_REAP_SILENCE_S``) or past its attempt's deadline is
    resumed: back in the queue with its finished arms, for the next free worker (``attempts.requeue``)
    — or failed once it has had ``TOLLGATE_MAX_RUN_ATTEMPTS``. A resumption that no worker took within
    ``TOLLGATE_RESUME_WAIT_S`` fails with the reason. Returns how many runs it acted on."""
    silence_s = settings.TOLLGATE_REAP_SILENCE_S if max_silence_s is None else max_silence_s
    now = timezone.now()
    acted = 0
    for attempt in list(attempts.stale(attempts.open_of_running(), silence_s, now)):
        acted += bool(reap(attempt, silence_s, now))
    wait_s = settings.TOLLGATE_RESUME_WAIT_S
    unresumed = (
        Run.objects.filter(status=Run.Status.QUEUED)
        .annotate(requeued=Max("attempts__ended"))
        .filter(requeued__lt=now - timedelta(seconds=wait_s))
    )
    for run in list(unresumed):
        lost = attempts.last(run)
        reason = f"{lost.reason}; no worker free for {wait_s / 60:.0f} min"
        acted += fail_unresumed(run, Run.Status.QUEUED, reason, lost)
    return acted + attempts.redispatch_lost(now)


def reap(attempt: RunAttempt, silence_s: float, now, *, resumable: bool = True, found: str = "") -> str:
    """End one running run whose executor is lost (its open ``attempt`` is ``attempts.stale``): back in the
    queue with its finished arms (``attempts.requeue``), or failed once it has had
    ``TOLLGATE_MAX_RUN_ATTEMPTS`` or when nobody would resume it (``resumable`` false). ``found``: who
    found it, added to the reason (the reaper says nothing). Returns what was done, in words (""
    when someone else acted first)."""
    overdue = attempt.deadline is not None and attempt.deadline < now
    how = "passed its deadline" if overdue else f"lost (no heartbeat for {silence_s:.0f} s)"
    reason = attempts.lost_reason(attempt, how) + (f"; {found}" if found else "")
    if attempt.number >= settings.TOLLGATE_MAX_RUN_ATTEMPTS:
        why = f"{reason}; gave up after {attempt.number} attempts"
    elif not resumable:
        why = f"{reason}; no worker consuming the runs queue to resume it"
    elif attempts.requeue(attempt, "lost", reason):
        return f"put it back in the queue to resume ({reason})"
    else:
        return ""
    return f"failed it ({why})" if fail_unresumed(attempt.run, Run.Status.RUNNING, why, attempt) else ""


def fail_unresumed(run: Run, status: str, reason: str, attempt: RunAttempt | None) -> int:
    """End a run that cannot be resumed as failed, finished arms kept, in the state it was found in:
    running in its open ``attempt`` (closed as lost), or queued after ``attempt`` (its latest; None:
    never claimed) with no attempt since."""
    with transaction.atomic():  # ended together with its summary and signed report, as in finish
        current = Run.objects.select_for_update().filter(pk=run.pk, status=status).first()
        if current is None:
            return 0
        if status == Run.Status.RUNNING:
            if attempt is not None and not attempts.close(attempt, "lost", reason):
                return 0
        elif RunAttempt.objects.filter(run=current, number__gt=attempt.number if attempt else 0).exists():
            return 0  # claimed (and put back) meanwhile: not the wait it was judged on
        error = f"{reason}.{kept_arms(current)}"
        Run.objects.filter(pk=run.pk).update(
            status=Run.Status.FAILED, finished=timezone.now(), error=error, waiting=""
        )
        after_end(current)
    log.warning("run %s failed: %s", run.code, error)
    return 1
