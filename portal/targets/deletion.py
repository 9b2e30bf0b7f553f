"""Deleting a target (with its runs, scenarios and SSH access) and a target's SSH access: owners
only, a target never while one of its runs is queued or running. Deleting SSH access deletes its
row, the key's ciphertext with it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from portal.projects.access import require_role
from portal.projects.deleting import confirm_then_delete
from portal.projects.models import Role
from portal.targets.access import get_target_for_user
from portal.targets.models import SshAccess

IN_PROGRESS = ("queued", "running")  # Run.Status values: runs import targets, not the other way


@login_required
@require_http_methods(["GET", "POST"])
def targets_delete(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    if target.runs.filter(status__in=IN_PROGRESS).exists():
        messages.warning(request, f"{target.name} has runs queued or running: cancel them first.")
        return redirect("targets-list")
    return confirm_then_delete(
        request,
        what=f"the target {target.name}",
        consequences=[
            f"Its {target.runs.count()} run(s) are deleted with it, with their reports and exports.",
            "Its saved scenarios and its SSH access (the stored key) are deleted too.",
        ],
        back=reverse("targets-list"),
        delete=target.delete,
        done=f"Target {target.name} deleted, with its runs, scenarios and SSH access.",
        then="targets-list",
    )


@login_required
@require_http_methods(["GET", "POST"])
def ssh_delete(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    access = SshAccess.objects.filter(target=target)
    if not access.exists():
        messages.info(request, f"{target.name} has no SSH access to delete.")
        return redirect("target-ssh", code=target.code)
    return confirm_then_delete(
        request,
        what=f"the SSH access of {target.name}",
        consequences=[
            "The stored private key (its ciphertext) and the pinned host key are erased.",
            "Runs of this target no longer probe its server until SSH access is set up again.",
        ],
        back=reverse("target-ssh", args=[target.code]),
        delete=access.delete,
        done="SSH access deleted: the stored key is gone. Remove its public key from the server.",
        then="target-ssh",
        code=target.code,
    )
