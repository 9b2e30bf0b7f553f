"""The benchmark engine: a Locust swarm in its own process (see docs/engine-protocol.md).

The run is on top (``swarm``, ``preflight``, ``users``, ``saturation``, ``unreachable``, ``hello``;
``distribution`` for a run across generator processes), its parts in packages below it: ``http``
(the timed clients, one module per protocol), ``tls`` (the run's TLS library and the TLS facts),
``matrix`` (the TLS matrix's variants) and ``recording`` (what an arm measured). docs/architecture.md,
"The engine", names every module.

Nothing here may import Locust at package import time: only ``python -m workers.engine`` loads it,
so gevent never patches a Celery worker. The engine's contract (config in, JSON lines out) lives in
``portal.lib.runs.protocol``, which both sides import.
"""
