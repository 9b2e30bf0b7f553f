"""Probes for load balancers and docker-compose (/healthz, /readyz), Prometheus metrics (/metrics)
and the operators' page (/ops/, staff only). docs/operations.md."""

from __future__ import annotations

import ipaddress
import logging

from allauth.account.adapter import get_adapter
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from portal.ops import checks, hosts, metrics
from portal.runs.models import Run

log = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process answers: no database, no broker (a load balancer's liveness probe)."""
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """200 when the database, the broker and the cache answer and a run worker was seen lately;
    503 otherwise. It is public (load balancers, docker-compose), so it says ready or not and
    nothing more: no address, worker name or exception text. Which check failed and why goes to the
    log, and to operators on /ops/ and ``tollgate healthcheck ready``."""
    found = checks.readiness()
    failing = [c for c in found if not c.ok]
    for check in failing:
        log.warning("/readyz: %s failing (%s, %.1f ms)", check.name, check.detail, check.ms)
    return JsonResponse({"status": "unavailable" if failing else "ok"}, status=503 if failing else 200)


def _client_allowed(request: HttpRequest) -> bool:
    try:  # REMOTE_ADDR, or X-Forwarded-For behind TOLLGATE_TRUSTED_PROXY_COUNT proxies
        address = ipaddress.ip_address(get_adapter(request).get_client_ip(request))
    except (PermissionDenied, ValueError):
        return False
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in ipaddress.ip_network(net) for net in settings.TOLLGATE_METRICS_NETWORKS)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format, to the networks of ``TOLLGATE_METRICS_NETWORKS`` only: 404 when none
    is set (no metrics endpoint at all), 403 to a client outside them."""
    if not settings.TOLLGATE_METRICS_NETWORKS:
        raise Http404("metrics are off (TOLLGATE_METRICS_NETWORKS is empty)")
    if not _client_allowed(request):
        raise PermissionDenied("not a metrics network")
    return HttpResponse(metrics.exposition(), content_type=CONTENT_TYPE_LATEST)


@login_required
@require_GET
def operators(request: HttpRequest) -> HttpResponse:
    """Generator hosts with their last heartbeat, runs in progress and measured capacity, and the
    readiness checks: operators (staff) only; others get 404."""
    if not request.user.is_staff:
        raise Http404
    context = {
        "hosts": hosts.host_rows(),
        "checks": checks.readiness(),
        "queued": Run.objects.filter(status=Run.Status.QUEUED).count(),
        "now": timezone.now(),
        "seen_s": settings.TOLLGATE_WORKER_SEEN_S,
    }
    return render(request, "ops/operators.html", context)
