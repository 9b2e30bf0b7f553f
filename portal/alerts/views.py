"""The current project's alert channels (viewers read; members add and remove; owners choose whether
alerts carry a share link) and the last deliveries to them."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from portal.alerts import services
from portal.alerts.forms import ChannelForm
from portal.alerts.models import AlertChannel, AlertDelivery, AlertSettings
from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.projects.access import can, current_project, require_role
from portal.projects.models import Role

LOG_ROWS = 50


def _audit(request: HttpRequest, project, action: str, **detail) -> None:
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        credential="alert channel",
        action=action,
        project_id=project.pk,
        **detail,
    )


def _post(request: HttpRequest, project, role: str) -> HttpResponse | ChannelForm:
    action = request.POST.get("action", "add")
    if action == "share":
        require_role(role, Role.OWNER)
        wanted = request.POST.get("share_links") == "on"
        AlertSettings.objects.update_or_create(project=project, defaults={"share_links": wanted})
        _audit(request, project, "share links on" if wanted else "share links off")
        return redirect("alerts-list")
    require_role(role, Role.MEMBER)
    if action == "remove":
        channel = get_object_or_404(AlertChannel, project=project, code=request.POST.get("channel", ""))
        channel.delete()
        _audit(request, project, "removed", channel_kind=channel.kind, target=channel.target)
        messages.info(request, f"Alert channel {channel.target} removed.")
        return redirect("alerts-list")
    form = ChannelForm(request.POST, project=project)
    if not form.is_valid():
        return form
    data = form.cleaned_data
    channel = services.add_channel(project, data["kind"], data["target"], data["improvements"], request.user)
    _audit(request, project, "added", channel_kind=channel.kind, target=channel.target)
    messages.info(request, f"Alerts of {project.name} now go to {channel.target}.")
    return redirect("alerts-list")


@login_required
@require_http_methods(["GET", "POST"])
def alerts_list(request: HttpRequest) -> HttpResponse:
    project, role = current_project(request)
    form, status = ChannelForm(project=project), 200
    if request.method == "POST":
        answer = _post(request, project, role)
        if isinstance(answer, HttpResponse):
            return answer
        form, status = answer, 400
    ctx = {
        "project": project,
        "channels": AlertChannel.objects.filter(project=project),
        "share_links": AlertSettings.objects.filter(project=project, share_links=True).exists(),
        "deliveries": AlertDelivery.objects.filter(
            alert__judgement__scenario__project=project
        ).select_related("alert__judgement__run", "alert__judgement__scenario")[:LOG_ROWS],
        "form": form,
        "can_write": can(role, Role.MEMBER),
        "is_owner": can(role, Role.OWNER),
    }
    return render(request, "alerts/list.html", ctx, status=status)
