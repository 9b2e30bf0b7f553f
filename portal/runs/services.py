"""Creating runs, shared by the form, the CLI and (later) the API and webhooks."""

from __future__ import annotations

from django.utils import timezone

from portal.lib.protocol import EngineConfig
from portal.runs.configs import engine_dict, seal_into
from portal.runs.models import Run
from portal.targets.models import Scenario, Target


def get_or_create_target(project, name: str, plain_url: str, tls_url: str) -> Target:
    """The project's target for this URL pair (made on first use), so runs group by target."""
    target, _ = Target.objects.get_or_create(
        project=project, plain_url=plain_url or "", tls_url=tls_url or "", defaults={"name": name}
    )
    return target


def create_run(
    owner,
    target: Target,
    config: dict,
    *,
    scenario: Scenario | None = None,
    source: str = "web",
    secrets: dict | None = None,
    budgets: dict | None = None,
) -> Run:
    """``secrets`` (``{"headers": {...}, "auth": {"type", "user", "secret"}}``) are encrypted into the
    run's config; the plaintext is never stored. The run belongs to its target's project; ``owner``
    is who started it. ``budgets`` (checked ``{name: limit}``, ``portal.lib.budgets``) go into
    ``config["budgets"]``; None: the scenario's, if any (``{}``: none at all)."""
    config = seal_into(config, secrets or {})
    if budgets is None and scenario is not None:
        budgets = scenario.budgets
    if budgets:
        config["budgets"] = dict(budgets)
    EngineConfig.from_dict(engine_dict(config))  # the engine must accept it; raises ValueError otherwise
    return Run.objects.create(
        project_id=target.project_id,
        owner=owner,
        target=target,
        scenario=scenario,
        scenario_version=scenario.version if scenario is not None else None,
        config=config,
        source=source,
    )


CANCELLED, STOPPING = "cancelled", "stopping"


def cancel(run: Run) -> str | None:
    """Cancel ``run`` as the page, the API and the CLI do. A queued run ends on the spot (one waiting
    to be resumed keeps its finished arms; the worker that meets its task seals its report); a
    running one is asked to stop: its executor ends the current arm early and keeps what was measured.
    ``CANCELLED``, ``STOPPING``, or None when it had ended meanwhile (conditional updates: a run that
    ends meanwhile is reported as ended, never cancelled after the fact)."""
    resumed = run.started is not None
    error = (
        "Cancelled while waiting to be resumed; the arms measured before are kept."
        if resumed
        else "Cancelled before it started."
    )
    if Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED, finished=timezone.now(), error=error, waiting=""
    ):
        return CANCELLED
    if Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True):
        return STOPPING
    return None
