"""Deleting what a project holds: runs, targets (with their runs), scenarios and SSH access.

Each delete is a confirmation page on GET and happens on POST with ``confirm=yes`` (no JavaScript
needed). Who may: a run, the project's owners or the member who started it; a target and SSH access,
owners; a scenario, members. Deleting SSH access deletes its row, the key's ciphertext with it.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from portal.projects.models import Role
from portal.runs.access import (
    get_run_for_user,
    get_scenario_for_user,
    get_target_for_user,
    may_delete_run,
    require_role,
)
from portal.runs.models import Run
from portal.targets.models import SshAccess

IN_PROGRESS = (Run.Status.QUEUED, Run.Status.RUNNING)


def _confirmed(request: HttpRequest) -> bool:
    return request.method == "POST" and request.POST.get("confirm") == "yes"


def _confirm_page(request: HttpRequest, *, what: str, consequences: list[str], back: str) -> HttpResponse:
    ctx = {"what": what, "consequences": consequences, "back": back, "action": request.path}
    return render(request, "projects/confirm_delete.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def runs_delete(request: HttpRequest, code) -> HttpResponse:
    run, role = get_run_for_user(request, code)
    if not may_delete_run(request.user, run, role):
        raise PermissionDenied("only the project's owners or the member who started it delete a run")
    if run.status in IN_PROGRESS:
        messages.warning(request, f"The run is {run.status}: cancel it first, then delete it.")
        return redirect("runs-detail", code=run.code)
    if not _confirmed(request):
        return _confirm_page(
            request,
            what=f"the run of {run.target.name} started {run.created:%Y-%m-%d %H:%M:%S} UTC",
            consequences=["Its arms, report and exports are deleted; compare links naming it stop working."],
            back=reverse("runs-detail", args=[run.code]),
        )
    run.delete()
    messages.info(request, "Run deleted.")
    return redirect("runs-list")


@login_required
@require_http_methods(["GET", "POST"])
def targets_delete(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    if target.runs.filter(status__in=IN_PROGRESS).exists():
        messages.warning(request, f"{target.name} has runs queued or running: cancel them first.")
        return redirect("targets-list")
    if not _confirmed(request):
        runs = target.runs.count()
        return _confirm_page(
            request,
            what=f"the target {target.name}",
            consequences=[
                f"Its {runs} run(s) are deleted with it, with their reports and exports.",
                "Its saved scenarios and its SSH access (the stored key) are deleted too.",
            ],
            back=reverse("targets-list"),
        )
    target.delete()
    messages.info(request, f"Target {target.name} deleted, with its runs, scenarios and SSH access.")
    return redirect("targets-list")


@login_required
@require_http_methods(["GET", "POST"])
def scenarios_delete(request: HttpRequest, code) -> HttpResponse:
    scenario, role = get_scenario_for_user(request, code)
    require_role(role, Role.MEMBER)
    if not _confirmed(request):
        return _confirm_page(
            request,
            what=f"the saved scenario {scenario.name}",
            consequences=["Runs started from it are kept; its sealed headers and credentials are deleted."],
            back=reverse("scenarios-detail", args=[scenario.code]),
        )
    scenario.delete()
    messages.info(request, f"Scenario {scenario.name} deleted.")
    return redirect("scenarios-list")


@login_required
@require_http_methods(["GET", "POST"])
def ssh_delete(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    if not SshAccess.objects.filter(target=target).exists():
        messages.info(request, f"{target.name} has no SSH access to delete.")
        return redirect("target-ssh", code=target.code)
    if not _confirmed(request):
        return _confirm_page(
            request,
            what=f"the SSH access of {target.name}",
            consequences=[
                "The stored private key (its ciphertext) and the pinned host key are erased.",
                "Runs of this target no longer probe its server until SSH access is set up again.",
            ],
            back=reverse("target-ssh", args=[target.code]),
        )
    SshAccess.objects.filter(target=target).delete()
    messages.info(
        request, "SSH access deleted: the stored key is gone. Remove its public key from the server."
    )
    return redirect("target-ssh", code=target.code)
