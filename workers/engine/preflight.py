"""The preflight of an arm, before anything is measured: where to connect, which request targets to
send (redirects resolved), and the TLS facts of the first TLS arm. Imported inside the engine
subprocess (``workers.engine.swarm``, which preflights every arm before it measures the first) and by
the Locust workers of a distributed run.

An arm whose preflight fails stops the run before its first measured second (``PreflightFailed``):
its target is unreachable, its certificate does not verify, or it answers a status outside the
expected set (shown with the first bytes of the body), so no arm spends its window on a run that
cannot succeed."""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urljoin

from portal.lib.runs.protocol import ArmSpec, EngineConfig
from portal.lib.tls import clientcerts
from workers.engine.discovery import Found, discover, quic_settings
from workers.engine.http.endpoint import ARM_POLICIES, ConnectionPolicy, Endpoint, origin_of, split_target
from workers.engine.http.http1 import MAX_HEAD_BYTES, TimedClient, parse_head
from workers.engine.http.http2 import H2Client
from workers.engine.http.http3.client import H3Client
from workers.engine.http.sample import CONNECTION_ERRORS, Sample
from workers.engine.tls import mtls
from workers.engine.tls.facts import handshake_facts
from workers.engine.tls.libraries import SSL, run_context

MAX_REDIRECTS = 5
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
# An answer outside the expected set shows this much of its body (escaped), so the reason says what
# the server said ("not found", a login page, a proxy's error).
BODY_SHOWN_BYTES = 200
BODY_KEPT_BYTES = 1024  # more than is shown: credentials the body echoes are blanked before the cut
KEPT_BYTES = MAX_HEAD_BYTES + BODY_KEPT_BYTES  # of an answer as received: its head, then its body
INSECURE_HINT = (
    "untick Verify TLS / `--insecure` / `verify_tls: false` if the certificate is self-signed on purpose"
)
SERVER_SOFTWARE_CHARS = 200  # of a Server header kept for the report (``server_software``)
AUTH_HEADERS = {401: "authorization", 407: "proxy-authorization"}  # the header each status asks for


class PreflightFailed(Exception):
    """Why an arm cannot be measured (``url``: the URL requested): the run stops before anything is
    measured."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(reason)
        self.url = url


class ArmRefused(PreflightFailed):
    """The server does not speak the arm's protocol (no h2 over ALPN, no HTTP/2 with prior knowledge,
    TLS where a plain HTTP/1.1 arm was pointed): the arm is refused with the reason, worded for the
    protocol the arm asked for, and the run measures its other arms."""


@dataclass
class Prepared:
    """What preflight settled for an arm: where to connect and which request targets to send."""

    endpoint: Endpoint
    context: ssl.SSLContext | SSL.Context | None  # on the run's TLS library (workers/engine/tls/libraries.py)
    targets: list[dict]  # {"path", "weight", "requested"}: final path after redirects
    redirects: list[dict]  # {"from", "to", "status"}
    origin: str
    server: str | None = None  # the Server header of the first target's answer (``server_software``)
    # HTTP/3 arms: where their QUIC server is (``discovery.Found.as_dict``: port, discovered_by, alt_svc).
    quic: dict | None = None


class _Keeping:
    """A preflight connection's socket (plain, TLS or the engine's cooperative one), keeping the first
    bytes each ``recv`` returns in ``kept``; everything else is the socket's own."""

    def __init__(self, sock, kept: bytearray) -> None:
        self._sock = sock
        self._kept = kept

    def recv(self, size: int) -> bytes:
        data = self._sock.recv(size)
        room = KEPT_BYTES - len(self._kept)
        if room > 0:
            self._kept += data[:room]
        return data

    def __getattr__(self, name: str):
        return getattr(self._sock, name)


class PeekingClient(TimedClient):
    """The arm's own client (its connection policy, headers and TLS settings) that also keeps what
    its last answer said, so a preflight can show the start of an unexpected answer's body. Only
    the preflight uses it: the measured requests never keep a byte."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.received = bytearray()

    def _open(self, sample: Sample) -> None:
        super()._open(sample)
        self.sock = _Keeping(self.sock, self.received)

    def request(self, url: str, path: str, method: str = "GET") -> Sample:
        self.received.clear()
        return super().request(url, path, method)

    def body_head(self) -> bytes:
        """The first bytes of the last answer's body (its chunks' data, for a chunked one)."""
        raw = bytes(self.received)
        end = raw.find(b"\r\n\r\n")
        if end < 0:
            return b""
        _, _, headers = parse_head(raw[:end].decode("latin-1"))
        body = raw[end + 4 :]
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body = dechunked(body)
        return body[:BODY_KEPT_BYTES]


def dechunked(raw: bytes) -> bytes:
    """The data of a chunked body's chunks, as far as ``raw`` goes."""
    data, pos = bytearray(), 0
    while (line_end := raw.find(b"\r\n", pos)) >= 0:
        try:
            size = int(raw[pos:line_end].split(b";", 1)[0].strip(), 16)
        except ValueError:
            break
        if size == 0:
            break
        data += raw[line_end + 2 : line_end + 2 + size]
        pos = line_end + 2 + size + 2
    return bytes(data)


def preflight(
    config: EngineConfig, arm: ArmSpec, headers: dict[str, str], found: dict | None = None
) -> Prepared:
    """Resolve the host, resolve redirects and make one request per target, before measuring; keep
    the first target's Server header. An unreachable arm, a certificate that does not verify and an
    answer outside the expected set fail loudly here (``PreflightFailed``) instead of becoming noise.
    A redirect is followed once (when allowed) and the final URL is measured; one that leaves the
    arm's origin fails the arm, because the arm would then measure another scheme, host or port.
    An HTTP/3 arm first finds its QUIC server (``discovery``; ``found``: what earlier arms of the run
    found, by endpoint) or is refused."""
    endpoint = Endpoint.resolve(arm.url, config.pinned)
    _, policy = ARM_POLICIES[arm.name]
    wanted = [(spec.path, spec.weight) for spec in config.paths or []] or [(split_target(arm.url), 1.0)]
    origin = origin_of(arm.url)
    quic = None
    if policy.http3:
        settings = quic_settings(config)
        quic = quic_server(config, endpoint, wanted[0][0], headers, settings, found)
        if quic.refusal:
            raise ArmRefused(origin + wanted[0][0], f"{arm.name} refused: {quic.refusal}")
        context = settings
    else:
        context = run_context(config, arm.name, http2=policy.http2) if endpoint.tls else None
    targets: list[dict] = []
    redirects: list[dict] = []
    server = None
    if arm.name == clientcerts.MTLS_ARM:
        # Asked for, sent and accepted, or the arm fails here with the server's alert.
        try:
            mtls.check(config, endpoint, clientcerts.arm_key_type(config.client_certs), wanted[0][0])
        except mtls.Rejected as exc:
            raise PreflightFailed(origin + wanted[0][0], str(exc)) from None
    client = preflight_client(config, endpoint, policy, context, headers, quic)
    try:
        for path, weight in wanted:
            current = path
            for _hop in range(MAX_REDIRECTS + 1):
                sample = client.request(current, current)
                if sample.error:
                    if refused := refusal(arm.name, policy.http2, endpoint, sample, config.timeout_s):
                        raise ArmRefused(origin + current, refused)
                    raise PreflightFailed(origin + current, transport_failure(sample))
                location = sample.location
                if not (config.follow_redirects and sample.status in REDIRECT_STATUSES and location):
                    break
                absolute = urljoin(origin + current, location)
                if origin_of(absolute) != origin:
                    raise PreflightFailed(
                        origin + current,
                        f"it redirects ({sample.status}) to {absolute}, which leaves the arm's origin "
                        f"{origin}; measure the final URL directly",
                    )
                redirects.append({"from": origin + current, "to": absolute, "status": sample.status})
                current = split_target(absolute)
            else:
                raise PreflightFailed(origin + path, f"more than {MAX_REDIRECTS} redirects")
            if not expected(config.expected_status, sample.status):
                raise not_expected(config, arm.name, endpoint, sample, client, headers, origin + current)
            if not targets:
                server = server_software(sample.server)
            targets.append({"path": current, "weight": weight, "requested": path})
    finally:
        client.close()
    return Prepared(endpoint, context, targets, redirects, origin, server, quic.as_dict() if quic else None)


def quic_server(
    config: EngineConfig, endpoint: Endpoint, path: str, headers: dict, settings, found: dict | None
) -> Found:
    """The endpoint's QUIC server (``discovery.discover``), found once per run (``found``)."""
    key = (endpoint.address, endpoint.port)
    if found is not None and key in found:
        return found[key]
    quic = discover(config, endpoint, path, headers, settings)
    if found is not None:
        found[key] = quic
    return quic


def preflight_client(
    config: EngineConfig, endpoint: Endpoint, policy: ConnectionPolicy, context, headers: dict, quic
):
    """The arm's own client for its preflight requests, keeping the start of each answer's body."""
    if policy.http3:
        client = H3Client(
            endpoint,
            policy,
            context,
            timeout_s=config.timeout_s,
            headers=headers,
            early_data=policy.early_data,
            port=quic.port,
        )
        client.keep_body = True
        return client
    if policy.http2:
        client = H2Client(endpoint, policy, context, timeout_s=config.timeout_s, headers=headers)
        client.keep_body = True
        return client
    return PeekingClient(endpoint, policy, context, timeout_s=config.timeout_s, headers=headers)


def not_expected(
    config: EngineConfig, arm: str, endpoint: Endpoint, sample: Sample, client, headers: dict, url: str
) -> PreflightFailed:
    """An answer outside the expected set: the arm's refusal when its port speaks another protocol
    (nginx answers a plain request on its TLS port 400 "The plain HTTP request was sent to HTTPS
    port"), else the preflight's failure with the start of the answer."""
    http2 = ARM_POLICIES[arm][1].http2
    if refused := refusal(arm, http2, endpoint, sample, config.timeout_s):
        return ArmRefused(url, refused)
    answer = unexpected_answer(sample, client.body_head(), config, headers)
    if arm == clientcerts.MTLS_ARM and sample.status in (400, 403, 495, 496):
        answer += " (with the client certificate presented: did the server reject it?)"
    return PreflightFailed(url, answer)


def server_software(header: str | None) -> str | None:
    """A ``Server`` header as the report keeps it: its text trimmed, at most
    ``SERVER_SOFTWARE_CHARS`` characters, a control character shown as "?" (none reaches a page or a
    log); None when the server sent none (or an empty one)."""
    text = (header or "").strip()[:SERVER_SOFTWARE_CHARS]
    return "".join(c if c.isprintable() else "?" for c in text) or None


def servers_seen(prepared: dict[str, Prepared], order: list[ArmSpec]) -> dict[str, str | None]:
    """The ``server_software`` message's payload: the Server header of the first arm's preflight
    answer on the TLS URL (``tls``) and on the plain URL (``plain``); None where no arm went, or the
    server sent none."""
    seen: dict[str, str | None] = {}
    for arm in order:
        ready = prepared[arm.name]
        seen.setdefault("tls" if ready.endpoint.tls else "plain", ready.server)
    return {"tls": seen.get("tls"), "plain": seen.get("plain")}


def h2_refusal(arm: str, tls: bool, sample: Sample) -> str:
    """Why an HTTP/2 arm is refused ("" when its failure is not a refusal): the server did not select
    h2 over ALPN, or over plain TCP it did not answer the HTTP/2 preface (it speaks HTTP/1.1 there)."""
    if sample.error == "alpn_refused":
        return f"{arm} refused: {sample.error_detail.partition(': ')[2]}"
    if not tls and sample.connect_us is not None and sample.error in ("protocol_error", "connection_reset"):
        return (
            f"{arm} refused: the server does not speak HTTP/2 with prior knowledge on this port "
            f"(it answered the HTTP/2 preface with {sample.error}: {sample.error_detail})"
        )
    return ""


TLS_PROBE_TIMEOUT_S = 3.0


def refusal(arm: str, http2: bool, endpoint: Endpoint, sample: Sample, timeout_s: float) -> str:
    """Why the arm is refused, worded for the protocol it asked for ("" when its failure is no
    refusal): an HTTP/2 arm's server without h2 (``h2_refusal``), a plain HTTP/1.1 arm's port that
    speaks TLS (``tls_port_refusal``) — never an HTTP/2 reason for an HTTP/1.1 arm."""
    if ARM_POLICIES[arm][1].http3:
        if sample.error == "alpn_refused":
            return f"{arm} refused: the server does not offer h3 over ALPN ({sample.error_detail})"
        return ""
    if http2:
        return h2_refusal(arm, endpoint.tls, sample) if sample.error else ""
    return tls_port_refusal(arm, endpoint, timeout_s)


def tls_port_refusal(arm: str, endpoint: Endpoint, timeout_s: float) -> str:
    """Why a plain HTTP/1.1 arm is refused when its port speaks TLS (one TLS handshake tells, no
    certificate checked): its URL names the server's TLS port. "" for a TLS arm, or a port that does
    not complete a TLS handshake (its failure is the arm's own, reported as such)."""
    if endpoint.tls:
        return ""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(
                (endpoint.address, endpoint.port), min(timeout_s, TLS_PROBE_TIMEOUT_S)
            ) as raw,
            context.wrap_socket(raw, server_hostname=endpoint.host),
        ):
            pass
    except (OSError, ssl.SSLError):
        return ""
    return (
        f"{arm} refused: port {endpoint.port} speaks TLS, not plain HTTP (it completed a TLS "
        "handshake): give the plain URL the server's http port"
    )


def expected(codes: list[int], status: int | None) -> bool:
    """Whether ``status`` is in the expected set (``EngineConfig.expected_status``; empty: any 2xx)."""
    if status is None:
        return False
    return status in codes if codes else 200 <= status < 300


def transport_failure(sample: Sample) -> str:
    """Why a preflight request got no answer, worded for the person who can fix it."""
    detail = f"{sample.error}: {sample.error_detail}"
    said = sample.error_detail or ""
    # OpenSSL's words on TCP; qh3's (an HTTP/3 arm) name the certificate in the alert it closed with.
    unverified = "CERTIFICATE_VERIFY_FAILED" in said or ("QuicClosed" in said and "certificate" in said)
    if sample.error == "tls_error" and unverified:
        return f"TLS certificate verification failed ({detail}); {INSECURE_HINT}"
    if sample.error == "tls_error":
        return f"TLS handshake failed ({detail})"
    if sample.error in CONNECTION_ERRORS:
        return f"target unreachable ({detail})"
    return f"no HTTP answer ({detail})"


def unexpected_answer(sample: Sample, body_head: bytes, config: EngineConfig, sent: dict[str, str]) -> str:
    """The first answer outside the expected set: its status, where a redirect not followed points or
    whether credentials were sent, and the start of its body. ``sent``: the headers the arm sends."""
    codes = config.expected_status
    label = ", ".join(str(code) for code in codes) if codes else "2xx"
    note = ""
    if sample.status in REDIRECT_STATUSES and sample.location and not config.follow_redirects:
        note = f" (a redirect to {json.dumps(sample.location[:BODY_SHOWN_BYTES])}, not followed)"
    elif sample.status in AUTH_HEADERS:
        note = auth_note(AUTH_HEADERS[sample.status], sent, config.headers)
    body = shown_body(sample.body_bytes, body_head, config.headers.values())
    return f"it answered {sample.status}{note}, outside the expected set ({label}); {body}"


def auth_note(header: str, sent: dict[str, str], configured: dict[str, str]) -> str:
    if any(name.lower() == header for name in sent):
        return " (the credentials sent were rejected)"
    if any(name.lower() == header for name in configured):
        return " (it asks for credentials: the run sends them over plain HTTP only when allowed)"
    return " (it asks for credentials; none are configured)"


def shown_body(size: int, head: bytes, secrets) -> str:
    """The body's first ``BODY_SHOWN_BYTES`` characters, escaped (JSON string rules, ASCII only: no
    control or direction characters reach a page or a log), credentials the run sends blanked."""
    if not size:
        return "empty body"
    text = head.decode("utf-8", "replace")
    # "Basic dXNlcjpw…": the whole value, then the token alone.
    blanked = {part for value in secrets for part in (value, value.partition(" ")[2]) if len(part) >= 4}
    for secret in sorted(blanked, key=len, reverse=True):
        text = text.replace(secret, "[credentials]")
    if size > len(head) or len(text) > BODY_SHOWN_BYTES:
        return f"body ({size:,} bytes) begins {json.dumps(text[:BODY_SHOWN_BYTES])}…"
    return f"body ({size:,} bytes): {json.dumps(text)}"


def tls_facts(config: EngineConfig, prepared: Prepared) -> dict:
    """The ``tls_info`` message's facts of an arm's endpoint (or the error: never fails the run)."""
    try:
        endpoint = prepared.endpoint
        return handshake_facts(
            endpoint.address,
            endpoint.port,
            server_name=endpoint.host,
            verify=config.verify_tls,
            timeout_s=config.timeout_s,
        )
    except Exception as exc:  # noqa: BLE001 - facts are a bonus; never fail the run for them
        return {"error": f"{type(exc).__name__}: {exc}"}
