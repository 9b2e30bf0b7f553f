"""The generator's facts for the engine's ``hello``: versions, host and CPU."""

from __future__ import annotations

import os
import platform
import socket
import ssl
from importlib import metadata

import gevent
import locust

from workers.engine.http import nghttp2
from workers.engine.tls import libraries


def engine_facts(tls_library: str = libraries.SYSTEM) -> dict:
    """The ``hello``'s facts; ``tls_library``: the run's (``run.engine.tls_library`` in the report)."""
    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "locust": locust.__version__,
        "gevent": gevent.__version__,
        "python": platform.python_version(),
        "openssl": ssl.OPENSSL_VERSION,
        "qh3": metadata.version("qh3"),  # the HTTP/3 arms' QUIC and HTTP/3 library (its own TLS 1.3)
        "tls_library": libraries.describe(tls_library),
        "http2": nghttp2.describe(),  # the HTTP/2 arms' protocol library (libnghttp2, else jh2)
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cores": os.cpu_count(),
        "pid": os.getpid(),
    }
