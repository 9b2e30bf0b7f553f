"""Creating runs, cancelling them and pinning baselines: one function each, shared by the pages, the
CLI, the API and webhooks."""

from __future__ import annotations

from django.utils import timezone

from portal.lib.runs.protocol import EngineConfig
from portal.lib.tls.clientcerts import MTLS_ARM, ClientCert, needs_client_cert
from portal.runs.configs import engine_dict, seal_into
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.targets.clientcerts import for_run as target_certs_for_run
from portal.targets.clientcerts import save_client_cert
from portal.targets.editing import get_or_create_target  # noqa: F401 - the run paths' door to targets
from portal.targets.models import Target


def create_run(
    owner,
    target: Target,
    config: dict,
    *,
    scenario: Scenario | None = None,
    source: str = "web",
    secrets: dict | None = None,
    budgets: dict | None = None,
    client_cert: ClientCert | None = None,
) -> Run:
    """``secrets`` (``{"headers": {...}, "auth": {"type", "user", "secret"}}``) are encrypted into the
    run's config; the plaintext is never stored. The run belongs to its target's project; ``owner``
    is who started it. ``budgets`` (checked ``{name: limit}``, ``portal.lib.report.budgets``) go into
    ``config["budgets"]``; None: the scenario's, if any (``{}``: none at all). ``client_cert`` (checked
    by ``portal.lib.tls.clientcerts.load_pair``) is stored on the target first; a run that presents a
    client certificate gets the target's sealed into its secrets (what it presents stays the same
    whatever the target holds later)."""
    secrets = dict(secrets or {})
    config = mtls_arm_to_target(config, target)
    if client_cert is not None:
        save_client_cert(target, client_cert)
    if needs_client_cert(config):
        secrets["client_certs"], secrets["client_cert_facts"] = target_certs_for_run(target)
    config = seal_into(config, secrets)
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


def mtls_arm_to_target(config: dict, target: Target) -> dict:
    """``config`` with its ``tls_mtls`` arm sent to the target's mTLS URL, when it has one (a server
    that asks for client certificates on another port or name than its TLS URL's, like the demo's
    Caddy): the form, the CLI, the API and webhooks give one TLS URL for every TLS arm."""
    if not target.mtls_url or not any(arm["name"] == MTLS_ARM for arm in config.get("arms", [])):
        return config
    arms = [{**arm, "url": target.mtls_url} if arm["name"] == MTLS_ARM else arm for arm in config["arms"]]
    return {**config, "arms": arms}


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


class NotABaseline(ValueError):
    """The run cannot be its target's baseline; the message says why."""


def baseline_refusal(run: Run, with_reason: bool = True) -> str:
    """Why ``run`` cannot be its target's baseline ("" when it can). A baseline is what compares
    start from, so it must be a whole measurement of the page: a run that succeeded (not a failed,
    cancelled or unfinished one) and one that measured something (a run recorded as succeeded
    before Tollgate failed runs whose every arm is invalid is refused too). The one check behind
    the run page's button, its POST, the API and the CLI. ``with_reason``: add why the run failed
    (the run page says it once, in its status line, and passes False)."""
    if run.status != Run.Status.SUCCEEDED:
        reason = run.failure_reason if with_reason else ""
        said = "it is incomplete" if run.status == Run.Status.INCOMPLETE else "it failed"
        why = f" ({said}: {reason})" if reason else ""
        article = "An" if run.status[0] in "aeiou" else "A"
        return f"{article} {run.status} run cannot be a baseline: only a run that succeeded can{why}."
    summary = run.summary or {}
    arms, invalid = summary.get("arms") or [], summary.get("invalid_arms") or []
    if arms and set(arms) <= set(invalid):
        return (
            "This run cannot be a baseline: none of its arms measured the page "
            f"(every arm is invalid: {', '.join(arms)})."
        )
    return ""


def pin_baseline(run: Run) -> Target:
    """Make ``run`` its target's baseline; ``NotABaseline`` (nothing pinned) when it cannot be one."""
    refusal = baseline_refusal(run)
    if refusal:
        raise NotABaseline(refusal)
    Target.objects.filter(pk=run.target_id).update(baseline=run)
    run.target.baseline = run
    return run.target


def unpin_baseline(run: Run) -> bool:
    """Unpin ``run`` if it is its target's baseline (False: it was not)."""
    if not Target.objects.filter(pk=run.target_id, baseline=run).update(baseline=None):
        return False
    run.target.baseline = None
    return True
