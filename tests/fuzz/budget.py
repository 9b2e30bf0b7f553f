"""How much each fuzz surface is fuzzed: one Hypothesis settings profile per mode, chosen by the
environment (``TOLLGATE_FUZZ=short|long``, default short), and a count of the cases each surface
actually ran (printed at the end of the session by tests/fuzz/conftest.py; in long mode the session
fails when the total is under ``LONG_MINIMUM``). Also ``no_dns``: random URLs must not reach a
resolver. docs/fuzzing.md says what each surface checks.

short: what ``make pytest`` and CI run — derandomized (the same cases every time, so CI does not flake
on a case it never saw before), about half a minute for the whole set on a 2-core machine.
long: ``make fuzz`` — random (every run explores new cases), ≥ 10,000 cases in total.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, settings

MODES = ("short", "long")
MODE = os.environ.get("TOLLGATE_FUZZ", "short").strip().lower() or "short"
if MODE not in MODES:
    raise RuntimeError(f"TOLLGATE_FUZZ={MODE!r}: expected short or long")
LONG_MINIMUM = 10_000

_COMMON = {
    "deadline": None,  # web cases hit PostgreSQL: their time says nothing about the code under test
    "database": None,  # no .hypothesis/ directory; a failure prints the case and a reproduce blob
    "print_blob": True,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}
settings.register_profile("tollgate-fuzz-short", derandomize=True, **_COMMON)
settings.register_profile("tollgate-fuzz-long", derandomize=False, **_COMMON)
PROFILE = settings.get_profile(f"tollgate-fuzz-{MODE}")

# Examples per test: (short, long). Pure parsers are cheap, web requests are not.
BUDGETS: dict[str, tuple[int, int]] = {
    "probes.openssl_speed": (80, 1500),
    "probes.cryptsetup": (80, 1500),
    "probes.proc_stat_cpu": (50, 800),
    "probes.proc_pid_stat": (50, 800),
    "known_hosts.text": (80, 1200),
    "known_hosts.entries": (40, 600),
    "known_hosts.private_key": (20, 200),
    "signing.mutations": (60, 1000),
    "signing.keys": (40, 500),
    "signing.cli": (20, 300),
    "webhooks.verify": (60, 1000),
    "webhooks.body": (60, 1000),
    "webhooks.endpoint": (30, 500),
    "run_form.inputs": (60, 1000),
    "run_form.post": (20, 400),
    "api.raw": (30, 800),
}
# tests/api/test_schema.py: schemathesis cases per operation and generation mode (8 operations,
# positive and negative, plus the 5 with a run id on a real run: 26 strategies).
SCHEMA_EXAMPLES = {"short": 15, "long": 100}[MODE]
SCHEMA_SURFACE = "api.schema"

COUNTS: Counter[str] = Counter()


def examples(surface: str) -> int:
    return BUDGETS[surface][MODES.index(MODE)]


def fuzz(surface: str, **overrides) -> settings:
    """The settings of one fuzz test: this mode's profile and this surface's budget."""
    return settings(PROFILE, max_examples=examples(surface), **overrides)


def schema_settings() -> settings:
    """tests/api/test_schema.py's settings: explicit examples and generation only (no shrinking of
    a server's answer sequence), this mode's budget."""
    return settings(PROFILE, max_examples=SCHEMA_EXAMPLES, phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck))  # fmt: skip


def count(surface: str) -> None:
    """One case of ``surface`` ran (called first thing in every fuzzed function)."""
    COUNTS[surface] += 1


def _numeric(host) -> bool:
    try:
        ipaddress.ip_address(str(host).split("%", 1)[0])
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def no_dns():
    """Name lookups of this process answered without DNS while fuzzing (random URLs name random
    hosts; the outbound policy resolves them): ``localhost`` is 127.0.0.1, addresses pass through,
    any other name does not resolve."""
    real = socket.getaddrinfo

    def stub(host, port, *args, **kwargs):
        if host is None or _numeric(host):
            return real(host, port, *args, **kwargs)
        if str(host).lower().rstrip(".") == "localhost":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]
        raise socket.gaierror(socket.EAI_NONAME, f"no DNS while fuzzing: {host}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "getaddrinfo", stub)
        yield
