"""The default scenario, in one place: the run form's initial values and the CLI's defaults.

Paced, not flat out. A closed loop without think time drives one generator process as hard as it
can go, so on a fast target it measures the client (``generator_saturation``), and a run's purpose
is the cost of TLS, not a throughput limit (that is a saturation search's job). The default is an
open loop at a rate well under what one engine process sustains in its most expensive arms
(``tls_new`` and ``tls_resumed``: a handshake per request costs the client about 1 ms of CPU too),
measured by ``bench/calibrate`` against the demo target and nginx on loopback (docs/performance.md),
with windows long enough for 1,000+ samples per arm (p99).

No Django here: ``bench/calibrate`` imports it on its own.
"""

from __future__ import annotations

ARMS = ("plain", "tls", "tls_new")
ARRIVAL_RATE = 60.0  # requests/s over all users, open loop
# Each user sends every USERS / ARRIVAL_RATE = 200 ms: room for a full handshake over a WAN before a
# user falls behind its schedule (the arrival_rate check).
USERS = 12
SPAWN_RATE = 12.0  # every user within the first second of the warm-up
WARMUP_S = 2.0
# 60 req/s × 20 s = 1,200 samples per arm: enough for p99 (sample_size needs 1,000).
DURATION_S = 20.0
THINK_TIME_S = 0.0
ROUNDS = 1

# The form says why the default is paced (portal/runs/forms.py).
ARRIVAL_RATE_HELP = (
    f"Open loop: requests start on a fixed schedule spread over the users, and latency counts from the "
    f"scheduled time. The default, {ARRIVAL_RATE:g} req/s, is paced on purpose: it stays well under what "
    "one generator process sustains even with a full handshake per request, so the report measures the "
    "server, not the client (docs/performance.md). Empty: closed loop, each user as fast as it can — "
    "that finds throughput limits, but often saturates the generator."
)
DURATION_HELP = (
    f"At the default rate, {DURATION_S:g} s give each arm {int(ARRIVAL_RATE * DURATION_S):,} samples: "
    "enough for p99 (1,000)."
)
