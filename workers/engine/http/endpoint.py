"""Where and how an arm connects: its endpoint (the address resolved or pinned once, before
measuring), its connection policy per arm name, and the URL helpers the preflight uses. Every timed
client (``http1``, ``http2``) and the TLS matrix's sub-arms read them."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from portal.lib.runs.protocol import pin_key


@dataclass(frozen=True)
class Endpoint:
    """Where to connect: the address is resolved once, before measuring, to keep DNS out; with a pin
    (``EngineConfig.pinned``) it is the address the outbound policy checked, never resolved here. The
    host name stays for SNI, certificate checks and ``Host``."""

    scheme: str
    host: str
    port: int
    address: str
    host_header: str

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    @classmethod
    def resolve(cls, url: str, pinned: dict[str, str] | None = None) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if pinned is not None:
            address = pinned.get(pin_key(url))
            if not address:
                raise ValueError(f"no pinned address for {pin_key(url)}; the engine does not resolve it")
        else:
            address = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)[0][4][0]
        default_port = 443 if parts.scheme == "https" else 80
        host = parts.hostname
        host_literal = f"[{host}]" if ":" in host else host
        host_header = host_literal if port == default_port else f"{host_literal}:{port}"
        return cls(parts.scheme, host, port, address, host_header)


@dataclass(frozen=True)
class ConnectionPolicy:
    new_connection_per_request: bool
    resume_sessions: bool
    http2: bool = False  # workers.engine.http.http2: ALPN h2 over TLS, or prior knowledge over TCP (h2c)
    http3: bool = False  # workers.engine.http.http3: QUIC over UDP, ALPN h3 (the TLS URL's host)
    early_data: bool = False  # h3_0rtt: the request sent as 0-RTT early data on a resumed connection


ARM_POLICIES: dict[str, tuple[str, ConnectionPolicy]] = {  # arm -> (scheme it needs, connection policy)
    "plain": ("http", ConnectionPolicy(new_connection_per_request=False, resume_sessions=False)),
    "plain_new": ("http", ConnectionPolicy(new_connection_per_request=True, resume_sessions=False)),
    "tls": ("https", ConnectionPolicy(new_connection_per_request=False, resume_sessions=False)),
    "tls_new": ("https", ConnectionPolicy(new_connection_per_request=True, resume_sessions=False)),
    "tls_resumed": ("https", ConnectionPolicy(new_connection_per_request=True, resume_sessions=True)),
    # tls_new's policy; its context presents the run's client certificate (tls.libraries.run_context).
    "tls_mtls": ("https", ConnectionPolicy(new_connection_per_request=True, resume_sessions=False)),
    "h2": ("https", ConnectionPolicy(new_connection_per_request=False, resume_sessions=False, http2=True)),
    "h2_new": ("https", ConnectionPolicy(new_connection_per_request=True, resume_sessions=False, http2=True)),
    "h2c": ("http", ConnectionPolicy(new_connection_per_request=False, resume_sessions=False, http2=True)),
    # HTTP/3 (workers.engine.http.http3.client: H3_ARMS): the TLS URL's host over UDP.
    "h3": ("https", ConnectionPolicy(new_connection_per_request=False, resume_sessions=False, http3=True)),
    "h3_new": ("https", ConnectionPolicy(new_connection_per_request=True, resume_sessions=False, http3=True)),
    "h3_resumed": (
        "https",
        ConnectionPolicy(new_connection_per_request=True, resume_sessions=True, http3=True),
    ),
    "h3_0rtt": (
        "https",
        ConnectionPolicy(new_connection_per_request=True, resume_sessions=True, http3=True, early_data=True),
    ),
}
H3_ARM_NAMES = ("h3", "h3_new", "h3_resumed", "h3_0rtt")


def origin_of(url: str) -> str:
    """scheme://host[:port] of a URL, with the default port left out, for same-origin checks."""
    parts = urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    host = f"[{parts.hostname}]" if parts.hostname and ":" in parts.hostname else parts.hostname
    port = parts.port or default
    return f"{parts.scheme}://{host}" + ("" if port == default else f":{port}")


def split_target(url: str) -> str:
    """The request target (path and query) of a URL."""
    parts = urlsplit(url)
    path = parts.path or "/"
    return f"{path}?{parts.query}" if parts.query else path
