"""The audit log page: operators see every event, owners their projects' (the log itself is
``portal.audit``, which every app writes to; the page reads memberships, so it lives here)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.audit.models import AuditEvent
from portal.projects.models import Membership, Role


@login_required
@require_GET
def audit_list(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first: operators (staff) see every event, project owners the events of
    the projects they own (member changes, credentials, target verification, quota refusals)."""
    events = AuditEvent.objects.select_related("actor")
    if not request.user.is_staff:
        owned = Membership.objects.filter(user=request.user, role=Role.OWNER).values_list("project_id")
        events = events.filter(project_id__in=owned)
    kind = request.GET.get("kind", "")
    if kind in AuditEvent.Kind.values:
        events = events.filter(kind=kind)
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    return render(request, "audit/list.html", {"page": page, "kinds": AuditEvent.Kind.choices, "kind": kind})
