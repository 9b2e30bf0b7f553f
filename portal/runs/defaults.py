"""The default scenario: the run form's initial values and the CLI's defaults, as
``portal.lib.runs.runspec`` declares them (paced, not flat out: see there and docs/performance.md).

No Django here: ``bench/calibrate`` imports it on its own.
"""

from __future__ import annotations

from portal.lib.runs.runspec import (  # noqa: F401 (the defaults, by name)
    ARMS,
    ARRIVAL_RATE,
    ARRIVAL_RATE_HELP,
    DURATION_HELP,
    DURATION_S,
    ROUNDS,
    SPAWN_RATE,
    THINK_TIME_S,
    USERS,
    WARMUP_S,
)
