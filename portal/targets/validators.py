"""Checks of what users type about a target, shared by every form (runs, targets) and the CLI."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from portal import outbound


def check_url(value: str, scheme: str) -> str:
    """A target URL of the given scheme: a host, a valid port, no credentials, no fragment, and an
    address the outbound policy allows (portal/outbound.py): a refused one is never stored or queued."""
    try:
        parts = urlsplit(value)
        port_ok = True
        try:
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            port_ok = False
    except ValueError:  # e.g. "http://[::1/": an unterminated IPv6 literal
        raise ValidationError("The URL is malformed (check brackets around an IPv6 address).") from None
    if parts.scheme != scheme:
        raise ValidationError(f"Needs an {scheme}:// URL (got {parts.scheme or 'no'} scheme).")
    if not parts.hostname:
        raise ValidationError("The URL has no host.")
    if parts.username or parts.password:
        raise ValidationError("Put credentials in the scenario's auth, not in the URL.")
    if parts.fragment:
        raise ValidationError("A URL fragment is never sent to the server; remove it.")
    if not port_ok:
        raise ValidationError("The port is not a number between 0 and 65535.")
    check_outbound(outbound.check_url(value))
    return value


def check_outbound(decision: outbound.Decision) -> None:
    """A field error naming the address and the rule when the outbound policy refuses it."""
    if not decision.allowed:
        reason = decision.reason
        raise ValidationError(reason[:1].upper() + reason[1:] + ".")
