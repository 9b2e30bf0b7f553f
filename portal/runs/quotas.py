"""A project's effective quota: its ProjectQuota over the operator's defaults in settings, and its
runs in flight and of the last day. The judging itself is ``portal.lib.runs.quotas`` (Django-free)."""

from __future__ import annotations

from dataclasses import fields

from django.conf import settings
from django.utils import timezone

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.lib.runs.quotas import DAY_S, Limits, check_counts
from portal.projects.models import Project, ProjectQuota
from portal.runs.models import Run


def operator_limits() -> Limits:
    return Limits(
        max_users=settings.TOLLGATE_MAX_USERS,
        max_arrival_rate=settings.TOLLGATE_MAX_ARRIVAL_RATE,
        max_duration_s=settings.TOLLGATE_MAX_DURATION_S,
        max_warmup_s=settings.TOLLGATE_MAX_WARMUP_S,
        max_rounds=settings.TOLLGATE_MAX_ROUNDS,
        max_requests_per_run=settings.TOLLGATE_MAX_REQUESTS_PER_RUN,
        max_concurrent_runs=settings.TOLLGATE_MAX_CONCURRENT_RUNS_PER_PROJECT,
        max_runs_per_day=settings.TOLLGATE_MAX_RUNS_PER_DAY_PER_PROJECT,
        max_generators=settings.TOLLGATE_MAX_GENERATORS,
    )


def limits_for(project: Project | None) -> Limits:
    """The operator's defaults, each replaced by the project's own value where an operator set one."""
    defaults = operator_limits()
    quota = ProjectQuota.objects.filter(project=project).first() if project is not None else None
    if quota is None:
        return defaults
    values = {f.name: getattr(quota, f.name, None) for f in fields(Limits)}
    return Limits(**{name: getattr(defaults, name) if v is None else v for name, v in values.items()})


def count_problems(project: Project, limits: Limits) -> list[str]:
    """Why the project may not queue one more run now (runs in flight, runs of the last 24 hours).
    A run its preflight stopped before any load (``Run.preflight_failed``) measured nothing and is not
    counted."""
    runs = Run.objects.filter(project=project, preflight_failed=False)
    active = runs.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).count()
    since = timezone.now() - timezone.timedelta(seconds=DAY_S)
    return check_counts(limits, active, runs.filter(created__gte=since).count(), project.name)


def audit_refusals(request, project: Project, refusals: list[str]) -> None:
    """A run refused by a quota is a security event (someone asked for more than allowed)."""
    if refusals:
        audit.record(request, AuditEvent.Kind.QUOTA_REFUSED, reasons=refusals, project_id=project.pk)
