"""Target ownership verification with the settings: which targets need it, whether one is verified,
and the check itself (``portal.lib.security.verification`` through the outbound address policy).

A target needs verification when any origin of its URLs resolves to a public address or to one in
``TOLLGATE_VERIFY_NETWORKS``; every address allow-listed (``TOLLGATE_ALLOW_NETWORKS``) and outside
those: no verification. A verification counts for ``TOLLGATE_VERIFICATION_MAX_AGE_DAYS``; the worker
checks again before every run (``workers/runner.py``), nothing else is sent before it succeeds.
"""

from __future__ import annotations

import ipaddress
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from portal import outbound
from portal.lib.runs.protocol import pin_key
from portal.lib.security import verification as lib
from portal.lib.security.netpolicy import parse_networks
from portal.targets.models import Target

NOT_NEEDED, VERIFIED, EXPIRED, UNVERIFIED = "not needed", "verified", "expired", "unverified"


def target_urls(target: Target) -> list[str]:
    return [url for url in (target.plain_url, target.tls_url) if url]


def origins_needing(urls: list[str], pins: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(url, pinned address) of the first URL of each origin that needs verification. Refused URLs
    are left out: the outbound policy refuses them on its own. ``pins`` (the run's
    ``EngineConfig.pinned``): judge the addresses checked at run start, never resolve again."""
    rule = outbound.policy()
    verify_networks = parse_networks(settings.TOLLGATE_VERIFY_NETWORKS)
    seen: dict[str, tuple[str, str]] = {}
    for url in urls:
        key = lib.origin(url)
        if key in seen:
            continue
        if pins and pin_key(url) in pins:
            addresses, pinned = [pins[pin_key(url)]], pins[pin_key(url)]
        else:
            decision = rule.check_url(url)
            if not decision.allowed:
                continue
            addresses, pinned = decision.addresses, decision.pinned
        if lib.needs_verification([ipaddress.ip_address(a) for a in addresses], rule, verify_networks):
            seen[key] = (url, pinned)
    return list(seen.values())


def expires_at(target: Target):
    if target.verified_at is None:
        return None
    return target.verified_at + timedelta(days=settings.TOLLGATE_VERIFICATION_MAX_AGE_DAYS)


def status(target: Target, urls: list[str] | None = None) -> str:
    """``not needed``, ``verified``, ``expired`` or ``unverified`` (resolves the target's hosts)."""
    if not origins_needing(urls if urls is not None else target_urls(target)):
        return NOT_NEEDED
    if target.verified_at is None:
        return UNVERIFIED
    return VERIFIED if timezone.now() < expires_at(target) else EXPIRED


def verify(target: Target, urls: list[str] | None = None, pins: dict[str, str] | None = None) -> lib.Outcome:
    """Fetch the token from every origin that needs it and store the outcome on the target. Only the
    verification requests are sent, to the addresses the policy checked (``pins``: the run's own,
    ``EngineConfig.pinned``, so the proof comes from the address that would receive the load)."""
    needing = origins_needing(urls if urls is not None else target_urls(target), pins)
    errors, methods = [], set()
    for url, pinned in needing:
        outcome = lib.verify_origin(url, pinned, target.verification_token)
        if outcome.verified:
            methods.add(outcome.method)
        else:
            errors.append(outcome.error)
    if errors:
        outcome = lib.Outcome(False, error="; ".join(errors))
        fields = {"verified_at": None, "verified_by_method": "", "verification_error": outcome.error}
    else:
        outcome = lib.Outcome(True, method="+".join(sorted(methods)) or "not needed")
        fields = {"verified_at": timezone.now(), "verified_by_method": outcome.method}
        fields["verification_error"] = ""
    Target.objects.filter(pk=target.pk).update(**fields)
    for name, value in fields.items():
        setattr(target, name, value)
    return outcome


def form_problem(target: Target | None, urls: list[str]) -> str | None:
    """Why a run on these URLs cannot start yet (the run form and the CLI), or None."""
    if not origins_needing(urls):
        return None
    if target is None:
        return (
            "This target must be verified before any load: add it on the Targets page, serve its token "
            f"at {lib.WELL_KNOWN_PATH} (or in a {lib.HEADER} header) and press Verify now."
        )
    state = status(target, urls)
    if state == VERIFIED:
        return None
    when = f" (verification expired on {expires_at(target):%Y-%m-%d})" if state == EXPIRED else ""
    return (
        f"Target {target.name} is not verified{when}: serve its token at {lib.WELL_KNOWN_PATH} (or in a "
        f"{lib.HEADER} header) and press Verify now on its verification page."
    )
