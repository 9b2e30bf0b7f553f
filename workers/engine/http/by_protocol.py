"""The timed client of an arm: HTTP/1.1 (``http1.TimedClient``), HTTP/2 (``http2.H2Client``) or HTTP/3
(``http3.client.H3Client``), by the arm's connection policy. The swarm, the preflight and the
benchmarks make clients here."""

from __future__ import annotations

from collections.abc import Callable

from workers.engine.http.endpoint import ConnectionPolicy, Endpoint
from workers.engine.http.http1 import TimedClient
from workers.engine.http.http2 import H2Client
from workers.engine.http.http3.client import H3Client


def new_client(
    endpoint: Endpoint,
    policy: ConnectionPolicy,
    context,
    *,
    timeout_s: float = 10.0,
    headers: dict[str, str] | None = None,
    streams: int = 1,
    quic=None,
) -> TimedClient:
    """The arm's client: HTTP/3 (``H3Client``; ``context`` is then the arm's ``QuicSettings``,
    ``quic`` its ``recording.quic.QuicTally``, which knows the UDP port and counts every connection)
    or HTTP/2 (``H2Client``) when its policy says so, else the HTTP/1.1 one."""
    if policy.http3:
        return H3Client(
            endpoint,
            policy,
            context,
            timeout_s=timeout_s,
            headers=headers,
            streams=streams,
            early_data=policy.early_data,
            port=quic.port if quic is not None else None,
            on_connection_open=quic.opened if quic is not None else None,
            on_connection_end=quic.ended if quic is not None else None,
        )
    if policy.http2:
        return H2Client(endpoint, policy, context, timeout_s=timeout_s, headers=headers, streams=streams)
    return TimedClient(endpoint, policy, context, timeout_s=timeout_s, headers=headers)


def client_factory(
    endpoint: Endpoint,
    policy: ConnectionPolicy,
    context,
    timeout_s: float,
    headers,
    streams: int,
    quic=None,
) -> tuple[Callable[[], TimedClient], int]:
    """An arm's ``new_client`` for its users, and the request loops (lanes) each user runs: ``streams``
    on HTTP/2 or HTTP/3 with a kept connection (h2, h2c, h3), else one."""

    def make() -> TimedClient:
        return new_client(
            endpoint, policy, context, timeout_s=timeout_s, headers=headers, streams=streams, quic=quic
        )

    multiplexed = (policy.http2 or policy.http3) and not policy.new_connection_per_request
    return make, streams if multiplexed else 1
