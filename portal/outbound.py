"""The outbound address policy of the settings: ``portal.lib.security.netpolicy.Policy`` with the operator's
``TOLLGATE_ALLOW_NETWORKS`` (parsed and checked by ``portal/settings.py``).

Used by every outbound path: the run, target and SSH forms and the CLI (refuse before anything is
stored or queued), the worker at run start (check again and pin the addresses for the engine) and the
SSH probe. The setting is read on every call, so an overridden setting takes effect at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from portal.lib.runs.protocol import pin_key
from portal.lib.security.netpolicy import Decision, Policy

__all__ = ["Decision", "Refused", "check_host", "check_url", "pins", "policy"]


class Refused(Exception):
    """An outbound address the policy refuses; the message names the address and the rule."""


def policy() -> Policy:
    return Policy(settings.TOLLGATE_ALLOW_NETWORKS)


def check_url(url: str) -> Decision:
    return policy().check_url(url)


def check_host(host: str, port: int) -> Decision:
    return policy().check_host(host, port)


def pins(urls: Iterable[str]) -> dict[str, str]:
    """The checked address per ``host:port`` of the URLs (``EngineConfig.pinned``): each host is
    resolved once, here; raises Refused for the first URL the policy refuses."""
    rule = policy()
    pinned: dict[str, str] = {}
    for url in urls:
        # The policy first: it refuses a malformed URL (a bad port) with a reason, where computing
        # the pin's key would raise.
        decision = rule.check_url(url)
        if not decision.allowed:
            raise Refused(f"{url}: {decision.reason}")
        pinned.setdefault(pin_key(url), decision.pinned)
    return pinned
