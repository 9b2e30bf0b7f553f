"""The benchmark engine: a Locust swarm in its own process (see docs/engine-protocol.md).

Nothing here may import Locust at package import time: the Celery worker imports
``workers.engine.protocol`` and must never be monkey-patched by gevent.
"""
