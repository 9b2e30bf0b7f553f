"""The benchmark engine: a Locust swarm in its own process (see docs/engine-protocol.md).

Nothing here may import Locust at package import time: only ``python -m workers.engine`` loads it,
so gevent never patches a Celery worker. The engine's contract (config in, JSON lines out) lives in
``portal.lib.runs.protocol``, which both sides import.
"""
