from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.lib import report
from portal.runs import reporting, services
from portal.runs.access import get_run_for_user, runs_for, scenarios_for
from portal.runs.execute import progress_key
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets.models import Scenario


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    # Queries: the page of runs with their targets (1), the count for the paginator (1).
    runs = runs_for(request.user).select_related("target")
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    return render(request, "runs/list.html", {"page": page})


@login_required
@require_http_methods(["GET", "POST"])
def runs_new(request: HttpRequest) -> HttpResponse:
    scenarios = scenarios_for(request.user).select_related("target")
    if request.method == "POST":
        form = RunForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            with transaction.atomic():
                target = services.get_or_create_target(
                    request.user, form.target_name_or_default(), data.get("plain_url"), data.get("tls_url")
                )
                scenario = None
                if data.get("save_as"):
                    scenario, _ = Scenario.objects.update_or_create(
                        owner=request.user,
                        name=data["save_as"],
                        defaults={"target": target, "config": _scenario_fields(form)},
                    )
                run = services.create_run(request.user, target, form.engine_config(), scenario=scenario)
                services.enqueue(run)
            return redirect("runs-detail", code=run.code)
    else:
        initial = {}
        if request.GET.get("scenario"):
            scenario = get_object_or_404(scenarios, code=request.GET["scenario"])
            initial = scenario.config
        form = RunForm(initial=initial or _default_initial())
    return render(request, "runs/new.html", {"form": form, "scenarios": scenarios})


def _default_initial() -> dict:
    return {
        "plain_url": settings.TOLLGATE_DEFAULT_PLAIN_URL,
        "tls_url": settings.TOLLGATE_DEFAULT_TLS_URL,
        "verify_tls": settings.TOLLGATE_DEFAULT_VERIFY_TLS,
    }


def _scenario_fields(form: RunForm) -> dict:
    data = dict(form.cleaned_data)
    data.pop("save_as", None)
    return json.loads(json.dumps(data, default=str))


@login_required
@require_GET
def runs_detail(request: HttpRequest, code) -> HttpResponse:
    run, can_write = get_run_for_user(request, code)
    ctx: dict = {"run": run, "can_write": can_write}
    arms = reporting.arms_of(run)
    if arms:
        data = reporting.run_report(run, request, arms)
        ctx["report"] = data
        ctx["arm_rows"] = [
            (name, section, data["deltas"].get(name)) for name, section in data["arms"].items()
        ]
        ctx["chart"] = {
            "ttlb": report.histogram_overlay(arms, "ttlb_us"),
            "ttfb": report.histogram_overlay(arms, "ttfb_us"),
        }
    return render(request, "runs/detail.html", ctx)


def progress_data(run: Run) -> dict:
    data = {
        "id": str(run.code),
        "status": run.status,
        "terminal": run.is_terminal,
        "error": run.error or None,
        "arms": run.arm_names,
        "started": run.started.isoformat() if run.started else None,
        "finished": run.finished.isoformat() if run.finished else None,
    }
    live = cache.get(progress_key(run)) if run.status == Run.Status.RUNNING else None
    if live:
        planned = live.get("planned_s") or 0
        data.update(
            arm=live["arm"],
            phase=live["phase"],
            arms_done=live.get("arms_done", []),
            elapsed_s=live["elapsed_s"],
            planned_s=planned,
            remaining_s=max(0.0, round(planned - live["elapsed_s"], 1)),
            fraction=min(1.0, live["elapsed_s"] / planned) if planned else 0.0,
            rps=live["rps"],
            users=live["users"],
        )
    elif run.status == Run.Status.RUNNING and run.started:
        data["elapsed_s"] = round((timezone.now() - run.started).total_seconds(), 1)
    return data


@login_required
@require_GET
def runs_progress(request: HttpRequest, code) -> JsonResponse:
    run, _ = get_run_for_user(request, code)
    return JsonResponse(progress_data(run))


@login_required
@require_GET
def runs_report_json(request: HttpRequest, code) -> JsonResponse:
    run, _ = get_run_for_user(request, code)
    response = JsonResponse(reporting.run_report(run, request), json_dumps_params={"indent": 2})
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="tollgate-run-{run.code}.json"'
    return response


@login_required
@require_POST
def runs_cancel(request: HttpRequest, code) -> HttpResponse:
    run, can_write = get_run_for_user(request, code)
    if not can_write:
        return HttpResponse(status=403)
    # A queued run is cancelled on the spot; a running one is asked to stop and keeps its arms.
    if Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
        status=Run.Status.CANCELLED, finished=timezone.now(), error="Cancelled before it started."
    ):
        messages.info(request, "Run cancelled before it started.")
    elif Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(cancel_requested=True):
        messages.info(request, "Stopping the run; what was measured so far is kept.")
    else:
        messages.warning(request, f"The run has already {run.status}.")
    return redirect("runs-detail", code=run.code)
