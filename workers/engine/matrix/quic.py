"""The TLS matrix for HTTP/3 (``h3_new@<variant>``): QUIC runs TLS 1.3 only, with tickets as its arm
says, so only the ``group`` dimension applies (``portal.lib.tls.matrix.MATRIX_ARMS``). Each variant
offers exactly one key-exchange group (``x25519``, ``p256`` as ``secp256r1``, ``x25519mlkem768`` as
``X25519MLKEM768``, or a ``tls_groups`` name qh3 knows) in the QUIC connection's ClientHello
(``workers.engine.http.http3.quic``), and its probe — one HTTP/3 request on a new connection, before any
window — says what was negotiated: the group from the ServerHello, the QUIC version, the cipher, ALPN
and the client's first flight, whose size the hybrid's key share grows (it must fit the server's
anti-amplification allowance: three times what the client sent). A group qh3 cannot offer, one the
server refuses, or a handshake that negotiated another group is refused with the reason, never measured.
"""

from __future__ import annotations

from portal.lib.runs.protocol import ArmSpec
from portal.lib.tls import matrix
from workers.engine.http.endpoint import ARM_POLICIES, Endpoint
from workers.engine.http.http3.client import H3Client
from workers.engine.http.http3.quic import GROUPS, make_settings
from workers.engine.matrix.rules import Refused


def quic_group(value: str) -> str:
    """The name qh3 is given for a group value (case as ``http3.quic.GROUPS`` spells it)."""
    name = matrix.canonical_group(value) or value
    folded = {known.lower(): known for known in GROUPS}
    if name.lower() not in folded:
        raise Refused(f"the HTTP/3 client (qh3) cannot offer {name} (it offers {', '.join(GROUPS)})")
    return folded[name.lower()]


def negotiate(endpoint: Endpoint, port: int, path: str, variant: dict, verify: bool, timeout_s: float):
    """One HTTP/3 request on a new connection offering the variant's group alone: (its QUIC settings,
    what it negotiated). Raises ``Refused``."""
    group = quic_group(variant["group"])
    settings = make_settings(verify, groups=(group,))
    client = H3Client(endpoint, ARM_POLICIES["h3_new"][1], settings, timeout_s=timeout_s, port=port)
    try:
        sample = client.request(path, path)
    finally:
        client.close()
    facts = sample.quic
    if sample.error is not None or facts is None or facts.handshake_us is None:
        raise Refused(f"its handshake failed: {sample.error}: {sample.error_detail}")
    negotiated = {
        "protocol": "TLSv1.3",
        "group": facts.group,
        "cipher": facts.cipher,
        "alpn": facts.alpn,
        "quic_version": facts.version,
        "probe_handshake_us": facts.handshake_us,
        "client_first_flight_bytes": facts.first_flight_bytes,
        "client_first_flight_datagrams": facts.first_flight_datagrams,
        "client_handshake_bytes": facts.handshake_bytes_sent,
        "server_handshake_bytes": facts.handshake_bytes_received,
        "session_resumed": None,
    }
    if not matrix.same_group(variant["group"], facts.group):
        raise Refused(f"asked for {group}, the handshake negotiated {facts.group}")
    return settings, negotiated


def expand(arm: ArmSpec, endpoint: Endpoint, quic: dict, path: str, dimensions, verify, timeout_s, groups):
    """Probe every group variant of ``arm`` (``h3_new``) at its QUIC server (``quic``: the preflight's
    ``Prepared.quic``): (sub-arms as (spec, settings, policy), the ``matrix`` message's entries)."""
    subs, entries = [], []
    for variant in matrix.variants(dimensions, arm.name, groups):
        name = matrix.variant_name(variant, arm.name)
        entry = {"name": name, "variant": variant, "status": "measured", "detail": "", "negotiated": {}}
        try:
            settings, entry["negotiated"] = negotiate(
                endpoint, quic["port"], path, variant, verify, timeout_s
            )
        except Refused as exc:
            entry.update(status="refused", detail=str(exc))
        else:
            subs.append((ArmSpec(name=name, url=arm.url), settings, ARM_POLICIES[arm.name][1]))
        entries.append(entry)
    return subs, entries
