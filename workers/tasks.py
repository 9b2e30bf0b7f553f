"""Celery tasks. They take ids, claim work atomically and delegate to portal.runs.execute."""

from __future__ import annotations

from celery import shared_task

from portal.runs import execute


@shared_task(name="workers.tasks.run_benchmark", acks_late=True)
def run_benchmark(run_id: int) -> str | None:
    run = execute.execute_run(run_id)
    return run.status if run else None


@shared_task(name="workers.tasks.reap_stale_runs")
def reap_stale_runs() -> int:
    return execute.reap_stale_runs()
