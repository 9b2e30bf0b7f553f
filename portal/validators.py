"""Checks of what users type (URLs, process names, free text, callback URLs), shared by every app's
forms (runs, targets, scenarios), the models and the CLI (which fills the same forms); like
``portal/outbound.py``, a module of the portal every app may import."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from portal import outbound
from portal.lib.runs.names import process_name_problem


def validate_process_name(value: str) -> None:
    """The one rule for a sampled process name (``portal.lib.runs.names``), as a Django validator."""
    problem = process_name_problem(value)
    if problem:
        raise ValidationError(problem, code="process_name")


def validate_text(value: str) -> None:
    """Free text that must be storable: no lone surrogates (a CLI argument that was not UTF-8, e.g.
    ``$'\\xff'``, arrives so), which PostgreSQL refuses with a DataError."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        message = "Not valid UTF-8 text (check the terminal's encoding)."
        raise ValidationError(message, code="encoding") from None


def non_ascii(value: str) -> str:
    """The first character outside printable ASCII, shown so a user can find it; "" if none."""
    for ch in value:
        if not 32 < ord(ch) < 127:
            return ch if ch.isprintable() and not ch.isspace() else repr(ch)
    return ""


def check_url(value: str, scheme: str) -> str:
    """A target URL of the given scheme: printable ASCII, a host, a valid port, no credentials, no
    fragment, and an address the outbound policy allows (portal/outbound.py): a refused one is never
    stored or queued."""
    bad = non_ascii(value)
    if bad:
        raise ValidationError(
            f"The URL has a space, control or non-ASCII character ({bad}): percent-encode the path "
            "(é is %C3%A9) and write an international host name in its xn-- form."
        )
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


def check_callback_url(value: str) -> str:
    """A scenario's callback URL (POSTed when a run ends): http or https, and an address the outbound
    policy allows, like a target's (``check_url``): a callback is an outbound request too."""
    scheme = value.split(":", 1)[0].lower() if ":" in value else ""
    if scheme not in ("http", "https"):
        raise ValidationError("A callback needs an http:// or https:// URL.")
    return check_url(value, scheme)
