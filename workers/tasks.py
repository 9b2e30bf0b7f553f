"""Celery tasks. They take ids, claim work atomically and delegate to ``workers.runner``.

The portal enqueues them by name (``portal.runs.dispatch``); nothing in the portal imports this.
"""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.utils import timezone

from portal.alerts import sending
from portal.runs.models import Run
from portal.schedules import firing
from workers import callbacks, generators, presence, retention, runner, slots, storage, watch


@shared_task(
    name="workers.tasks.run_benchmark",
    acks_late=True,
    bind=True,
    # The database away when the run is claimed: the same task again, later.
    autoretry_for=storage.UNAVAILABLE,
    retry_backoff=2,
    retry_backoff_max=30,
    max_retries=20,
)
def run_benchmark(self, run_id: int, waiting_since: str | None = None) -> str | None:
    since = datetime.fromisoformat(waiting_since) if waiting_since else None
    with presence.stop_requests():
        run = runner.execute_run(run_id, worker=self.request.hostname or "", waiting_since=since)
    if run is not None and run.status == Run.Status.QUEUED:
        # Waiting for a generator (or a slot of its project): the same task again after a backoff,
        # carrying when it first waited; past TOLLGATE_GENERATOR_WAIT_S the claim fails the run.
        since = since or timezone.now()
        raise self.retry(
            countdown=slots.wait_retry_s(self.request.retries),
            kwargs={"waiting_since": since.isoformat()},
            max_retries=None,
        )
    return run.status if run else None


@shared_task(name="workers.tasks.reap_stale_runs")
def reap_stale_runs() -> int:
    return runner.reap_stale_runs()


@shared_task(name="workers.tasks.prune_logs")
def prune_logs() -> dict[str, int]:
    return retention.prune_logs()


@shared_task(name="workers.tasks.deliver_callback", acks_late=True, bind=True)
def deliver_callback(self, run_id: int) -> None:
    """One attempt per execution (``workers.callbacks.deliver``); the next one is a Celery retry
    after the backoff the attempt asked for."""
    wait_s = callbacks.deliver(run_id, self.request.retries + 1)
    if wait_s is not None:
        raise self.retry(countdown=wait_s, max_retries=None)


@shared_task(name="workers.tasks.fire_schedule", acks_late=True, bind=True)
def fire_schedule(self, schedule_id: int) -> str | None:
    """The beat's tick of a scenario's schedule: start its run or log why not
    (``portal.schedules.firing``); the task id makes a redelivery a no-op."""
    done = firing.fire(schedule_id, self.request.id or "")
    return done.outcome if done else None


@shared_task(name="workers.tasks.judge_run", acks_late=True)
def judge_run(run_id: int) -> str | None:
    """A run of a scenario ended: judge it against the baseline, alert its project's channels."""
    return watch.judge(run_id)


@shared_task(name="workers.tasks.deliver_alert", acks_late=True, bind=True)
def deliver_alert(self, alert_id: int, channel_id: int) -> None:
    """One attempt per execution (``portal.alerts.sending.deliver``); the next one is a Celery retry
    after the backoff the attempt asked for."""
    wait_s = sending.deliver(alert_id, channel_id, self.request.retries + 1)
    if wait_s is not None:
        raise self.retry(countdown=wait_s, max_retries=None)


@shared_task(name="workers.tasks.join_run", acks_late=False)
def join_run(run_id: int, master_host: str, master_port: int, processes: int, limit_s: float = 3600.0) -> int:
    """On a generator host (its ``gen.<name>`` queue): Locust workers that join run ``run_id``'s master
    until it ends (docs/scaling.md). A redelivery after the run is pointless, hence no late ack."""
    return generators.join(master_host, master_port, processes, limit_s)
