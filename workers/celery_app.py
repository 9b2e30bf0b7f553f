"""The Celery app: broker from Django settings (CELERY_*), a dedicated `runs` queue, the reaper."""

from __future__ import annotations

import os
import socket

from celery import Celery
from celery.signals import celeryd_after_setup
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("tollgate")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    result_serializer="json",
    task_ignore_result=True,
    # A run is acknowledged when it ends: a worker that dies mid-run lets the broker redeliver,
    # and the atomic claim in the task turns the redelivery into a no-op.
    task_acks_late=True,
    # A pool process that dies mid-run (kill -9, OOM) gives its message back at once instead of
    # acknowledging it: the redelivered task takes the run over (workers.attempts.executor_lost).
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue="celery",
    # Runs hold a worker slot for their whole length; the reaper has its own queue (and worker) so
    # that busy run workers can never starve it.
    task_routes={
        "workers.tasks.run_benchmark": {"queue": "runs"},
        "workers.tasks.reap_stale_runs": {"queue": "maintenance"},
        # Callbacks (workers.callbacks) wait for no run: the maintenance worker sends them.
        "workers.tasks.deliver_callback": {"queue": "maintenance"},
        "workers.tasks.prune_logs": {"queue": "maintenance"},
        # Scenario schedules (portal.schedules): the beat's tick starts a run, which the runs queue takes.
        "workers.tasks.fire_schedule": {"queue": "maintenance"},
        # Judging a run of a scenario against its baseline, and its alerts (portal/judgements, alerts).
        "workers.tasks.judge_run": {"queue": "maintenance"},
        "workers.tasks.deliver_alert": {"queue": "maintenance"},
    },
    # Scenario schedules are rows (django-celery-beat) that the portal, CLI and API edit; the entries
    # below are written into the same tables when the beat starts.
    beat_scheduler="django_celery_beat.schedulers:DatabaseScheduler",
    beat_schedule={
        # Expires: a reaper that could not run in its turn is replaced by the next one.
        "reap-stale-runs": {
            "task": "workers.tasks.reap_stale_runs",
            "schedule": float(settings.TOLLGATE_REAP_EVERY_S),
            "options": {"expires": max(1.0, settings.TOLLGATE_REAP_EVERY_S - 1.0)},
        },
        # Refused webhook deliveries and share views older than TOLLGATE_LOG_RETENTION_DAYS.
        "prune-logs": {
            "task": "workers.tasks.prune_logs",
            "schedule": 24 * 3600.0,
            "options": {"expires": 3600},
        },
    },
    broker_connection_retry_on_startup=True,
)
app.autodiscover_tasks(["workers"])


@celeryd_after_setup.connect
def consume_generator_queue(sender, instance, **_kwargs) -> None:
    """With TOLLGATE_GENERATOR_QUEUE, this worker is a generator host: it also consumes
    ``gen.<TOLLGATE_GENERATOR_NAME or host name>``, where runs invite it to join their Locust master."""
    if settings.TOLLGATE_GENERATOR_QUEUE:
        name = settings.TOLLGATE_GENERATOR_NAME or socket.gethostname()
        instance.app.amqp.queues.select_add(f"gen.{name}")
