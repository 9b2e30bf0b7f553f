"""The timed client of an arm: HTTP/1.1 (``client.TimedClient``) or HTTP/2 (``http2.H2Client``), by
the arm's connection policy. The swarm, the preflight and the benchmarks make clients here."""

from __future__ import annotations

from collections.abc import Callable

from workers.engine.http.endpoint import ConnectionPolicy, Endpoint
from workers.engine.http.http1 import TimedClient
from workers.engine.http.http2 import H2Client


def new_client(
    endpoint: Endpoint,
    policy: ConnectionPolicy,
    ssl_context,
    *,
    timeout_s: float = 10.0,
    headers: dict[str, str] | None = None,
    streams: int = 1,
) -> TimedClient:
    """The arm's client: HTTP/2 (``H2Client``) when its policy says so, else the HTTP/1.1 one."""
    if policy.http2:
        return H2Client(endpoint, policy, ssl_context, timeout_s=timeout_s, headers=headers, streams=streams)
    return TimedClient(endpoint, policy, ssl_context, timeout_s=timeout_s, headers=headers)


def client_factory(
    endpoint: Endpoint, policy: ConnectionPolicy, ssl_context, timeout_s: float, headers, streams: int
) -> tuple[Callable[[], TimedClient], int]:
    """An arm's ``new_client`` for its users, and the request loops (lanes) each user runs: ``streams``
    on HTTP/2 with a kept connection (h2, h2c), else one."""

    def make() -> TimedClient:
        return new_client(
            endpoint, policy, ssl_context, timeout_s=timeout_s, headers=headers, streams=streams
        )

    return make, streams if policy.http2 and not policy.new_connection_per_request else 1
