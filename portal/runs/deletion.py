"""Deleting a run: the project's owners or the member who started it; never while it is queued or
running (cancel first). Targets, their SSH access and scenarios are deleted by their own apps."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from portal.projects.deleting import confirm_then_delete
from portal.runs.access import get_run_for_user, may_delete_run
from portal.runs.models import Run

IN_PROGRESS = (Run.Status.QUEUED, Run.Status.RUNNING)


@login_required
@require_http_methods(["GET", "POST"])
def runs_delete(request: HttpRequest, code) -> HttpResponse:
    run, role = get_run_for_user(request, code)
    if not may_delete_run(request.user, run, role):
        raise PermissionDenied("only the project's owners or the member who started it delete a run")
    if run.status in IN_PROGRESS:
        messages.warning(request, f"The run is {run.status}: cancel it first, then delete it.")
        return redirect("runs-detail", code=run.code)
    return confirm_then_delete(
        request,
        what=f"the run of {run.target.name} started {run.created:%Y-%m-%d %H:%M:%S} UTC",
        consequences=["Its arms, report and exports are deleted; compare links naming it stop working."],
        back=reverse("runs-detail", args=[run.code]),
        delete=run.delete,
        done="Run deleted.",
        then="runs-list",
    )
