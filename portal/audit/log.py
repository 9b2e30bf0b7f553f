"""Record audit events: ``record(request, AuditEvent.Kind.X, key=value, …)`` from a view or receiver."""

from __future__ import annotations

import ipaddress
import logging

from allauth.account.adapter import get_adapter
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from portal.audit.models import AuditEvent

LOGGER = "tollgate.audit"
log = logging.getLogger(LOGGER)


def network(address: str) -> str:
    """The address's network: IPv4 /24, IPv6 /48 (``""`` for what is not an address)."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return ""
    prefix = 24 if ip.version == 4 else 48
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def client_network(request: HttpRequest | None) -> str:
    if request is None:
        return ""
    try:  # REMOTE_ADDR, or X-Forwarded-For behind TOLLGATE_TRUSTED_PROXY_COUNT proxies
        return network(get_adapter(request).get_client_ip(request))
    except PermissionDenied:
        return ""


def record(
    request: HttpRequest | None,
    kind: str,
    *,
    actor=None,
    actor_name: str = "",
    project_id: int | None = None,
    **detail,
) -> AuditEvent:
    """Store one event; the actor is the request's user unless given."""
    if actor is None and request is not None:
        user = getattr(request, "user", None)
        actor = user if user is not None and user.is_authenticated else None
    if actor is not None and not actor_name:
        actor_name = actor.get_username()
    event = AuditEvent.objects.create(
        actor=actor,
        actor_name=actor_name[:150],
        kind=kind,
        ip=client_network(request),
        detail=detail,
        project_id=project_id,
    )
    log.info("audit %s actor=%s ip=%s %s", kind, actor_name or "-", event.ip or "-", detail or "")
    return event
