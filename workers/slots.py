"""Slots: how many runs a generator host and a project may run at once, and how long a run waits
for one. A claim (``workers.runner.claim``) asks ``waiting_reason`` under the host's and project's
row locks; a run that has to wait stays queued, its task tried again after ``wait_retry_s`` for at
most ``TOLLGATE_GENERATOR_WAIT_S`` from its first wait, then it fails with what ``waiting_reason``
said it would (docs/reliability.md, "A bounded wait for a slot")."""

from __future__ import annotations

from django.conf import settings

from portal.runs.models import Run
from portal.runs.quotas import limits_for

# A waiting run is tried again after this, doubling up to WAIT_RETRY_MAX_S.
WAIT_RETRY_S = 10
WAIT_RETRY_MAX_S = 60


def wait_retry_s(tries: int) -> int:
    """How long a waiting run's task waits before its ``tries``-th try: 10, 20, 40, 60, 60 … s."""
    return min(WAIT_RETRY_S * 2 ** min(tries, 8), WAIT_RETRY_MAX_S)


def waiting_reason(run: Run, host: str) -> tuple[str, str] | None:
    """Why ``run`` cannot start on ``host`` now, and what its failure says once it waited too long
    for that; None when it can start."""
    running = Run.objects.filter(status=Run.Status.RUNNING).exclude(pk=run.pk)
    on_host = list(
        running.filter(attempts__ended__isnull=True, attempts__host=host).values_list("code", flat=True)
    )
    if len(on_host) >= settings.TOLLGATE_MAX_RUNS_PER_GENERATOR:
        return (
            f"waiting for a generator ({len(on_host)} running on {host})",
            f"no generator free on {host} for {_span(settings.TOLLGATE_GENERATOR_WAIT_S)}: {_held(on_host)}",
        )
    in_project = list(running.filter(project_id=run.project_id).values_list("code", flat=True))
    if len(in_project) >= limits_for(run.project).max_concurrent_runs:
        return (
            f"waiting for a run of project {run.project.name} to end ({len(in_project)} running)",
            f"no run of project {run.project.name} ended in {_span(settings.TOLLGATE_GENERATOR_WAIT_S)}: "
            f"{_held(in_project)}",
        )
    return None


def _span(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _held(codes: list) -> str:
    return f"held by run{'s' if len(codes) > 1 else ''} {', '.join(str(code) for code in codes)}"
