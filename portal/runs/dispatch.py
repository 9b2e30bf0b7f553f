"""The portal's one door to the workers: enqueue work by task name.

The web process never imports the task bodies, the engine or the probes (``workers.runner``,
``workers.engine``, ``workers.probes``): it only names a task and hands its arguments to the Celery
app, whose configuration (broker, queues, routes) is all it loads of ``workers``.
"""

from __future__ import annotations

from django.db import transaction

from portal.lib.runs.protocol import EngineConfig, run_limit_s
from portal.runs.configs import engine_dict
from portal.runs.models import Run
from workers.celery_app import app

RUN_TASK = "workers.tasks.run_benchmark"
RUNS_QUEUE = "runs"
# The soft limit lets the task record why it stopped; the hard one kills it.
SOFT_LIMIT_MARGIN_S = 30
HARD_LIMIT_MARGIN_S = 60


def task_limits(run: Run) -> tuple[float, float]:
    """(soft, hard) time limits of a run's task: the engine, its probes and a margin to finish."""
    limit = run_limit_s(EngineConfig.from_dict(engine_dict(run.config)), run.config.get("probes"))
    return limit + SOFT_LIMIT_MARGIN_S, limit + HARD_LIMIT_MARGIN_S


def enqueue(run: Run) -> None:
    """Send the run to the `runs` queue once the row is committed (the worker must see it)."""
    soft, hard = task_limits(run)
    transaction.on_commit(
        lambda: app.send_task(
            RUN_TASK, args=[run.pk], queue=RUNS_QUEUE, soft_time_limit=soft, time_limit=hard
        )
    )
