"""Entry point: ``python -m workers.engine < config.json``; JSON lines on stdout.

Locust is imported first so that gevent patches socket/ssl before anything else loads them. A
SIGTERM (cancel) that comes while it loads is remembered and honoured once the engine runs: the run
still ends ``cancelled``, never killed half-started.
"""

import signal  # noqa: I001 - only to remember an early SIGTERM; gevent patches nothing of it here

_TERMINATED: list[int] = []
signal.signal(signal.SIGTERM, lambda signum, frame: _TERMINATED.append(signum))

import locust  # noqa: E402, F401, I001 - before anything using sockets: it monkey-patches with gevent

import os  # noqa: E402
import sys  # noqa: E402


def _protocol_stream():
    # Keep stdout for the protocol only: anything else that prints (Locust, gevent's hub
    # reporting a greenlet error) goes to stderr instead of corrupting the JSON lines.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return out


def _bad_config(text: str) -> str | None:
    """Why the config cannot be run (bad JSON, a field outside RunSpec's bounds), or None."""
    import json

    from portal.lib.runs.protocol import EngineConfig

    try:
        data = json.loads(text)
    except ValueError as exc:
        return f"not JSON: {exc}"
    try:
        EngineConfig.from_dict(data)
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        return str(exc)
    return None


if __name__ == "__main__":
    from portal.lib.runs.protocol import EXIT_BAD_CONFIG
    from workers.engine.swarm import main

    stream = _protocol_stream()
    text = sys.stdin.read()
    if (why := _bad_config(text)) is not None:
        print(f"tollgate engine: bad config: {why}", file=sys.stderr)
        sys.exit(EXIT_BAD_CONFIG)
    sys.exit(main(text, stream, terminated=lambda: bool(_TERMINATED)))
