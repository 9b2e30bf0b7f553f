"""Entry point: ``python -m workers.engine < config.json``; JSON lines on stdout.

Locust is imported first so that gevent patches socket/ssl before anything else loads them.
"""

import locust  # noqa: F401, I001 - must come first: it monkey-patches with gevent

import os
import sys


def _protocol_stream():
    # Keep stdout for the protocol only: anything else that prints (Locust, gevent's hub
    # reporting a greenlet error) goes to stderr instead of corrupting the JSON lines.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return out


if __name__ == "__main__":
    from workers.engine.swarm import main

    stream = _protocol_stream()
    sys.exit(main(sys.stdin.read(), stream))
