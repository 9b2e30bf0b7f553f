"""Target ownership verification: the token, where it is served, and the fetch that reads it.

Before any load on an address outside the operator's allow-list, the project proves it controls the
target: each origin the load would go to serves the target's token, either as a line of
``/.well-known/tollgate-verification.txt`` or in a ``Tollgate-Verification`` response header (on that
file's response or on the target URL's). The fetch connects to the address the outbound policy checked
(the host name is only the ``Host`` header and SNI), waits at most a few seconds, reads at most 4 KiB
and follows a redirect only to the same scheme, host and port (at most two). The rules:
docs/outbound-policy.md, "Verification".

Django-free; the caller resolves and checks the address (``portal.lib.security.netpolicy``) and
stores the result.
"""

from __future__ import annotations

import hmac
import http.client
import secrets
import socket
import ssl
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from portal.lib.security.netpolicy import (
    DEFAULT_PORTS,
    NO_ANSWER,
    IPAddress,
    IPNetwork,
    Policy,
    is_address,
    refusal,
)

WELL_KNOWN_PATH = "/.well-known/tollgate-verification.txt"
HEADER = "Tollgate-Verification"
TOKEN_PREFIX = "tollgate-"  # noqa: S105 - a prefix, not a secret
BODY_MAX_BYTES = 4096
TIMEOUT_S = 5.0
MAX_REDIRECTS = 2
USER_AGENT = "Tollgate-Verification/1"


def new_token() -> str:
    """A fresh per-target token: 192 random bits, URL- and header-safe."""
    return TOKEN_PREFIX + secrets.token_urlsafe(24)


def body_has(body: bytes, token: str) -> bool:
    """Whether any line of the file is exactly the token (one file can serve several targets' tokens)."""
    want = token.encode("ascii")
    found = False
    for line in body.splitlines():
        # No early exit: the comparison takes as long whichever line matches.
        found |= hmac.compare_digest(line.strip(), want)
    return found


def header_has(values: Iterable[str], token: str) -> bool:
    found = False
    for value in values:
        found |= hmac.compare_digest(value.strip().encode("ascii", "replace"), token.encode("ascii"))
    return found


def needs_verification(addresses: list[IPAddress], policy: Policy, verify_networks: list[IPNetwork]) -> bool:
    """Every address allow-listed (an internal range the operator opened) and none in
    ``verify_networks``: no verification. A public address, or one in ``verify_networks``: needed."""
    for address in addresses:
        if refusal(address) is None or policy.allowed_by(address) is None:
            return True
        if any(address.version == net.version and address in net for net in verify_networks):
            return True
    return False


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL, the unit verification proves (each origin the load reaches)."""
    parts = urlsplit(url)
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{parts.scheme}://{host}:{port}"


@dataclass(frozen=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]


@dataclass(frozen=True)
class Outcome:
    verified: bool
    method: str = ""  # "file" or "header"
    error: str = ""


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the checked address, with the host name for SNI. The certificate is not checked: the
    proof is that the address that will receive the load serves the token (self-signed targets too)."""

    def __init__(self, pinned: str, host: str, port: int, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        super().__init__(pinned, port, timeout=timeout, context=context)
        self.sni = host

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.sni)


class NoAnswer(OSError):
    """No HTTP answer; the message is NO_ANSWER whatever the cause (and the time taken the timeout)."""

    def __init__(self) -> None:
        super().__init__(NO_ANSWER)


def fetch(url: str, pinned: str, timeout_s: float | None = None) -> Response:
    """One GET of ``url`` sent to ``pinned``; the body read up to BODY_MAX_BYTES. NoAnswer on any
    failure below HTTP, raised no sooner than ``timeout_s`` (TIMEOUT_S) after the start."""
    timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
    started = time.monotonic()
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    if parts.scheme == "https":
        server_name = None if is_address(host) else host
        conn = _PinnedHTTPS(pinned, server_name, port, timeout_s)
    else:
        conn = http.client.HTTPConnection(pinned, port, timeout=timeout_s)
    default = port == DEFAULT_PORTS[parts.scheme]
    shown = f"[{host}]" if ":" in host else host
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.putrequest("GET", target, skip_host=True)
        conn.putheader("Host", shown if default else f"{shown}:{port}")
        conn.putheader("User-Agent", USER_AGENT)
        conn.putheader("Connection", "close")
        conn.endheaders()
        response = conn.getresponse()
        body = response.read(BODY_MAX_BYTES)
        return Response(response.status, list(response.getheaders()), body)
    except (OSError, http.client.HTTPException, ValueError):
        # A refused connection would answer at once and a silent port after the timeout: wait out
        # the timeout either way, so the time taken says nothing about the port either.
        conn.close()
        time.sleep(max(0.0, started + timeout_s - time.monotonic()))
        raise NoAnswer from None
    finally:
        conn.close()


def get_same_origin(url: str, pinned: str, timeout_s: float | None = None) -> tuple[Response | None, str]:
    """GET, following at most MAX_REDIRECTS redirects and only within the same scheme, host and port
    (so to the same pinned address); (response, "") or (None, why it stopped)."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            response = fetch(url, pinned, timeout_s)
        except OSError as exc:
            return None, f"{url}: {exc}"
        location = response.header("Location")
        if response.status not in (301, 302, 303, 307, 308) or not location:
            return response, ""
        following = urljoin(url, location[0].strip())
        if origin_or_none(following) != origin(url):
            # The Location is not repeated: it is the peer's text (an internal name, say).
            return None, f"{url} redirects to another origin: not followed"
        url = following
    return None, f"{url}: more than {MAX_REDIRECTS} redirects"


def origin_or_none(url: str) -> str | None:
    try:
        return origin(url) if urlsplit(url).scheme in DEFAULT_PORTS else None
    except (ValueError, KeyError):
        return None


def verify_origin(url: str, pinned: str, token: str, timeout_s: float | None = None) -> Outcome:
    """Whether the origin of ``url``, reached at ``pinned``, serves ``token``: the well-known file
    first, then the header (on that response, else on one GET of ``url`` itself)."""
    base = origin(url)
    response, error = get_same_origin(base + WELL_KNOWN_PATH, pinned, timeout_s)
    problems = []
    if response is not None:
        if response.status == 200 and body_has(response.body, token):
            return Outcome(True, "file")
        if header_has(response.header(HEADER), token):
            return Outcome(True, "header")
        if response.status == 200:
            problems.append(f"{base}{WELL_KNOWN_PATH} does not contain this target's token")
        else:
            problems.append(f"{base}{WELL_KNOWN_PATH} answered HTTP {response.status}")
    else:
        problems.append(error)
    page, error = get_same_origin(url, pinned, timeout_s)
    if page is not None and header_has(page.header(HEADER), token):
        return Outcome(True, "header")
    if page is not None:
        problems.append(f"{url} has no {HEADER} header with this target's token")
    else:
        problems.append(error)
    return Outcome(False, error="; ".join(dict.fromkeys(p for p in problems if p)))
