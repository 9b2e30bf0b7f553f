from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.audit.models import AuditEvent


@login_required
def audit_list(request: HttpRequest) -> HttpResponse:
    """The audit log, newest first (operators; project owners see their project's once projects exist)."""
    if not request.user.is_staff:
        raise PermissionDenied
    events = AuditEvent.objects.select_related("actor")
    kind = request.GET.get("kind", "")
    if kind in AuditEvent.Kind.values:
        events = events.filter(kind=kind)
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    return render(request, "audit/list.html", {"page": page, "kinds": AuditEvent.Kind.choices, "kind": kind})
