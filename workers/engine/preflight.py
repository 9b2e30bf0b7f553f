"""The preflight of an arm, before anything is measured: where to connect, which request targets to
send (redirects resolved), and the TLS facts of the first TLS arm. Imported inside the engine
subprocess (``workers.engine.swarm``) and by the Locust workers of a distributed run."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import urljoin

from portal.lib.protocol import ArmSpec, EngineConfig
from workers.engine.client import (
    ARM_POLICIES,
    Endpoint,
    TimedClient,
    make_ssl_context,
    origin_of,
    split_target,
)
from workers.engine.tlsinfo import probe_tls

MAX_REDIRECTS = 5
REDIRECT_STATUSES = (301, 302, 303, 307, 308)


@dataclass
class Prepared:
    """What preflight settled for an arm: where to connect and which request targets to send."""

    endpoint: Endpoint
    context: ssl.SSLContext | None
    targets: list[dict]  # {"path", "weight", "requested"}: final path after redirects
    redirects: list[dict]  # {"from", "to", "status"}
    origin: str


def preflight(config: EngineConfig, arm: ArmSpec, headers: dict[str, str]) -> Prepared:
    """Resolve the host, resolve redirects and make one request per target, before measuring.

    An unreachable arm fails loudly here instead of becoming noise. A redirect is followed once
    (when allowed) and the final URL is measured; one that leaves the arm's origin fails the arm,
    because the arm would then measure another scheme, host or port.
    """
    endpoint = Endpoint.resolve(arm.url, config.pinned)
    context = make_ssl_context(config.verify_tls) if endpoint.tls else None
    _, policy = ARM_POLICIES[arm.name]
    specs = config.paths or []
    wanted = [(spec.path, spec.weight) for spec in specs] or [(split_target(arm.url), 1.0)]
    origin = origin_of(arm.url)
    targets: list[dict] = []
    redirects: list[dict] = []
    client = TimedClient(endpoint, policy, context, timeout_s=config.timeout_s, headers=headers)
    try:
        for path, weight in wanted:
            current = path
            for _hop in range(MAX_REDIRECTS + 1):
                sample = client.request(current, current)
                if sample.error:
                    raise ConnectionError(f"{sample.error}: {sample.error_detail}")
                location = sample.location
                if not (config.follow_redirects and sample.status in REDIRECT_STATUSES and location):
                    break
                absolute = urljoin(origin + current, location)
                if origin_of(absolute) != origin:
                    raise ConnectionError(
                        f"{origin + current} redirects ({sample.status}) to {absolute}, which leaves the "
                        f"arm's origin {origin}; measure the final URL directly"
                    )
                redirects.append({"from": origin + current, "to": absolute, "status": sample.status})
                current = split_target(absolute)
            else:
                raise ConnectionError(f"more than {MAX_REDIRECTS} redirects from {origin + path}")
            targets.append({"path": current, "weight": weight, "requested": path})
    finally:
        client.close()
    return Prepared(endpoint, context, targets, redirects, origin)


def tls_facts(config: EngineConfig, prepared: Prepared) -> dict:
    """The ``tls_info`` message's facts of an arm's endpoint (or the error: never fails the run)."""
    try:
        endpoint = prepared.endpoint
        return probe_tls(
            endpoint.address,
            endpoint.port,
            server_name=endpoint.host,
            verify=config.verify_tls,
            timeout_s=config.timeout_s,
        )
    except Exception as exc:  # noqa: BLE001 - facts are a bonus; never fail the run for them
        return {"error": f"{type(exc).__name__}: {exc}"}
