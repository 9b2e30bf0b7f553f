"""The fuzz set's count of cases: printed per surface at the end of the session and, in long mode
(``make fuzz``) with every surface run, held to at least ``LONG_MINIMUM`` cases in total.

Under pytest-xdist each worker counts its own cases and nothing is printed (``make pytest`` runs
the short mode that way); ``make fuzz`` runs in one process.
"""

from __future__ import annotations

import pytest

from tests.api.conftest import bearer, world  # noqa: F401 - the API fixtures, for tests/fuzz/test_api.py
from tests.fuzz import budget


@pytest.fixture(scope="module", autouse=True)
def _no_dns():
    with budget.no_dns():
        yield


def _surfaces_run() -> set[str]:
    return {surface for surface, n in budget.COUNTS.items() if n}


def _complete() -> bool:
    """Whether every surface of the table (and the schemathesis test) ran in this process."""
    return _surfaces_run() >= {*budget.BUDGETS, budget.SCHEMA_SURFACE}


def pytest_sessionfinish(session, exitstatus) -> None:
    total = sum(budget.COUNTS.values())
    if budget.MODE == "long" and _complete() and total < budget.LONG_MINIMUM:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if not budget.COUNTS:
        return
    write = terminalreporter.write_line
    terminalreporter.section(f"fuzz cases run ({budget.MODE} mode)")
    for surface, n in sorted(budget.COUNTS.items()):
        write(f"{surface:28} {n:7d}")
    total = sum(budget.COUNTS.values())
    write(f"{'total':28} {total:7d}")
    if budget.MODE != "long":
        return
    if not _complete():
        missing = sorted({*budget.BUDGETS, budget.SCHEMA_SURFACE} - _surfaces_run())
        write(f"(not every surface ran — {', '.join(missing)} did not — so the total is not checked)")
    elif total < budget.LONG_MINIMUM:
        write(f"FAILED: long mode ran {total} cases, fewer than {budget.LONG_MINIMUM}", red=True)
    else:
        write(f"long mode: {total} ≥ {budget.LONG_MINIMUM} cases", green=True)
