"""Saved scenarios: the current project's list, one scenario with its versions' runs, and its edit
page (the run form's fields pre-filled, plus name, budgets and callback URL; every save a new
version). Viewers read, members edit and delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from portal.lib.report import budgets
from portal.projects.access import can, current_project, require_role
from portal.projects.deleting import confirm_then_delete
from portal.projects.models import Role
from portal.runs import starting
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.scenarios import queries
from portal.scenarios.access import get_scenario_for_user, scenarios_for
from portal.scenarios.auditing import scenario_saved
from portal.scenarios.forms import ScenarioForm
from portal.scenarios.secrets import SavedSecrets, secret_origins

MAX_RUNS_SHOWN = 200


def budget_status(run: Run | None) -> str | None:
    """A run's overall budget verdict from its stored summary: pass, fail, skip; None (no budgets)."""
    found = ((run.summary or {}).get("budgets") if run is not None else None) or {}
    return found.get("status")


@login_required
@require_GET
def scenarios_list(request: HttpRequest) -> HttpResponse:
    # Queries: the current project (1), its scenarios with their targets (1), their last runs (1).
    project, role = current_project(request)
    scenarios = list(scenarios_for(request.user).filter(project=project).select_related("target"))
    last = queries.last_runs([s.pk for s in scenarios])
    for scenario in scenarios:
        scenario.last_run = last.get(scenario.pk)
        scenario.last_budgets = budget_status(scenario.last_run)
    ctx = {
        "project": project,
        "scenarios": scenarios,
        "can_write": can(role, Role.MEMBER),
    }
    return render(request, "scenarios/list.html", ctx)


@login_required
@require_GET
def scenarios_detail(request: HttpRequest, code) -> HttpResponse:
    scenario, role = get_scenario_for_user(request, code)
    runs = list(
        scenario.runs.order_by("-created", "-pk").only(
            "code", "status", "created", "summary", "scenario_version", "source", "scenario_id"
        )[:MAX_RUNS_SHOWN]
    )
    for run in runs:
        run.budget_status = budget_status(run)
    ctx = {
        "scenario": scenario,
        "target": scenario.target,
        "runs": runs,
        "budgets": [
            {**item, "limit": (scenario.budgets or {}).get(item["name"])} for item in budgets.describe()
        ],
        "can_write": can(role, Role.MEMBER),
        "has_secrets": bool(scenario.config.get("secrets")),
        "secret_origins": secret_origins(scenario),
    }
    return render(request, "scenarios/detail.html", ctx)


def _run_form(scenario, data=None) -> RunForm:
    saved = SavedSecrets.of(scenario)
    if data is not None:
        form = RunForm(data, saved=saved, project=scenario.project, queueing=False)
    else:
        form = RunForm(initial=starting.scenario_form_data(scenario), project=scenario.project)
    del form.fields["save_as"]  # the scenario's name is its own field here
    return form


@login_required
@require_http_methods(["GET", "POST"])
def scenarios_edit(request: HttpRequest, code) -> HttpResponse:
    scenario, role = get_scenario_for_user(request, code)
    require_role(role, Role.MEMBER)
    if request.method == "POST":
        form = _run_form(scenario, request.POST)
        meta = ScenarioForm(request.POST, scenario=scenario)
        # Both validated, so every field error shows at once.
        if all([form.is_valid(), meta.is_valid()]):
            before = scenario.version
            saved = starting.store_scenario(
                scenario.project,
                form,
                name=meta.cleaned_data["name"],
                scenario=scenario,
                budgets=meta.budgets(),
                callback_url=meta.cleaned_data["callback_url"],
                tolerance_pct=meta.cleaned_data.get("tolerance_pct"),
            )
            typed = sorted(k for k in ("headers", "auth_secret") if form.cleaned_data.get(k))
            scenario_saved(request, saved, before, secrets_typed=typed)
            messages.info(request, f"Scenario {saved.name} saved as version {saved.version}.")
            return redirect("scenarios-detail", code=saved.code)
    else:
        form = _run_form(scenario)
        meta = ScenarioForm(initial=ScenarioForm.initial_of(scenario), scenario=scenario)
    ctx = {
        "scenario": scenario,
        "form": form,
        "meta": meta,
        "has_secrets": bool(scenario.config.get("secrets")),
        "secret_origins": secret_origins(scenario),
    }
    return render(request, "scenarios/edit.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def scenarios_delete(request: HttpRequest, code) -> HttpResponse:
    scenario, role = get_scenario_for_user(request, code)
    require_role(role, Role.MEMBER)
    return confirm_then_delete(
        request,
        what=f"the saved scenario {scenario.name}",
        consequences=["Runs started from it are kept; its sealed headers and credentials are deleted."],
        back=reverse("scenarios-detail", args=[scenario.code]),
        delete=scenario.delete,
        done=f"Scenario {scenario.name} deleted.",
        then="scenarios-list",
    )
