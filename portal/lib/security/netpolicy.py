"""The outbound address policy (SSRF guard): where Tollgate may send anything.

Every outbound path asks this module first: the load itself (the run form, the CLI and the worker at
run start), the redirects resolved before measuring (the engine follows only same-origin redirects,
which go to the address pinned here), the TLS facts (same endpoint) and the SSH probes; later the
callbacks and verification fetches.

A host is resolved **once**; the run is refused when **any** of its addresses is private, loopback,
link-local (with 169.254.169.254), carrier-grade NAT, multicast, reserved, unspecified, a broadcast,
documentation or benchmarking address, or an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 form of
one. Numeric IPv4 spellings (``2130706433``, ``0x7f.1``, ``017700000001``, ``127.1``) are read the
way ``inet_aton`` and browsers read them, Unicode host names go through IDNA, a trailing dot is
dropped. The address checked is the one to connect to for the whole run (``Decision.pinned``), so
DNS rebinding cannot switch the target after the check. An operator's allow-list
(``TOLLGATE_ALLOW_NETWORKS``, CIDRs) permits internal ranges. The rules: docs/outbound-policy.md.

Django-free; the resolver is injectable (tests use stub resolvers, never the internet).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

ALLOW_ENV = "TOLLGATE_ALLOW_NETWORKS"
HINT = f"an operator can allow it with {ALLOW_ENV}"
DEFAULT_PORTS = {"http": 80, "https": 443}
# What an outbound request (verification, callbacks) says when no HTTP answer came, whatever the
# cause (nothing listening, no answer in time, a TLS failure, a peer that does not speak HTTP such as
# an SSH server's banner): one text, never the peer's bytes, so no request tells a closed port from
# an open one or repeats what a non-HTTP service sent.
NO_ANSWER = (
    "no HTTP answer: the connection failed or timed out, TLS failed (an untrusted certificate?), "
    "or the peer does not speak HTTP"
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[..., list]

# (network, what it is). Checked in order, the first match names the rule; more specific first.
_V4_RULES = (
    ("0.0.0.0/32", "an unspecified address"),
    ("0.0.0.0/8", "a 'this network' address"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.169.254/32", "a cloud metadata address"),
    ("169.254.0.0/16", "a link-local address"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "a reserved address (IETF protocol assignments)"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a reserved address (6to4 relay anycast)"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("255.255.255.255/32", "a broadcast address"),
    ("240.0.0.0/4", "a reserved address"),
)
_V6_RULES = (
    ("::/128", "an unspecified address"),
    ("::1/128", "a loopback address"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard-only address"),
    ("2001::/32", "a Teredo tunnel address"),
    ("2001:2::/48", "a benchmarking address"),
    ("2001:db8::/32", "a documentation address"),
    ("2001::/23", "a reserved address (IETF protocol assignments)"),
    ("3fff::/20", "a documentation address"),
    ("fd00:ec2::254/128", "a cloud metadata address"),
    ("fc00::/7", "a private (unique local) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
)
_RULES = [(ipaddress.ip_network(net), what) for net, what in _V4_RULES + _V6_RULES]
# IPv6 forms that carry an IPv4 address, judged as that address: (network, name, bits of the v4 part).
_EMBEDDING = (
    (ipaddress.ip_network("::ffff:0:0/96"), "an IPv4-mapped", 0),
    (ipaddress.ip_network("::/96"), "an IPv4-compatible", 0),
    (ipaddress.ip_network("64:ff9b::/96"), "a NAT64", 0),
    (ipaddress.ip_network("2002::/16"), "a 6to4", 80),
)
_HOST_NAME = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")


class PolicyError(ValueError):
    """An allow-list entry that is not a network in CIDR notation."""


class BadHost(ValueError):
    """A host no careful parser could agree on."""


@dataclass(frozen=True)
class Decision:
    """What the policy decided for one URL (or SSH host and port), before anything was sent."""

    url: str
    host: str
    port: int | None
    addresses: list[str] = field(default_factory=list)
    allowed: bool = False
    reason: str = ""

    @property
    def pinned(self) -> str | None:
        """The address to connect to for the whole run: the one checked, never resolved again."""
        return self.addresses[0] if self.allowed and self.addresses else None

    def as_dict(self) -> dict:
        return {
            "url": self.url,
            "host": self.host,
            "addresses": self.addresses,
            "allowed": self.allowed,
            "reason": self.reason,
        }


def parse_networks(items: Iterable[str]) -> list[IPNetwork]:
    """``TOLLGATE_ALLOW_NETWORKS`` entries → networks; a host part with bits set is a typo, refused."""
    networks = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=True))
        except ValueError as exc:
            raise PolicyError(f"{text!r} is not a network in CIDR notation ({exc})") from None
    return networks


def _ipv4_part(text: str) -> int | None:
    """One part of a numeric IPv4 spelling: decimal, 0x hex or 0-led octal, as inet_aton reads it."""
    if text[:2] in ("0x", "0X"):
        return int(text[2:] or "0", 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text[1:], 8) if set(text[1:]) <= set("01234567") else None
    return int(text) if text.isdigit() else None


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any spelling ``inet_aton`` and browsers accept (``127.1``, ``0x7f.0.0.1``,
    ``2130706433``, ``017700000001``), or None when the host is a name. A host whose last label is a
    number but which is no valid IPv4 address (``1.2.3.4.5``, ``08.1``) raises BadHost, as in browsers."""
    labels = host.split(".")
    if not _NUMBER.match(labels[-1]):
        return None
    if len(labels) > 4 or not all(_NUMBER.match(label) for label in labels):
        raise BadHost(f"{host} looks like an IPv4 address but is not one")
    parts = [_ipv4_part(label) for label in labels]
    if any(part is None for part in parts) or any(part > 255 for part in parts[:-1]):
        raise BadHost(f"{host} looks like an IPv4 address but is not one")
    if parts[-1] >= 256 ** (5 - len(parts)):
        raise BadHost(f"{host} is out of range for an IPv4 address")
    value = parts[-1] + sum(part << (8 * (3 - i)) for i, part in enumerate(parts[:-1]))
    return ipaddress.IPv4Address(value)


def normalise_host(host: str) -> str | IPAddress:
    """The address a host spells, or its ASCII name (IDNA, lower case, no trailing dot)."""
    if not host:
        raise BadHost("the URL has no host")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        try:
            return ipaddress.IPv6Address(host.split("%", 1)[0])
        except ValueError:
            raise BadHost(f"{host} is not a valid IPv6 address") from None
    try:
        # IDNA maps full-width digits, ideographic full stops and upper case to what DNS would see.
        ascii_host = host.encode("idna").decode("ascii").lower() if host else ""
    except UnicodeError:
        raise BadHost(f"{host} is not a valid host name") from None
    if ascii_host.endswith(".") and len(ascii_host) > 1:
        ascii_host = ascii_host[:-1]
    address = parse_ipv4(ascii_host)
    if address is not None:
        return address
    if len(ascii_host) > 253 or not _HOST_NAME.match(ascii_host):
        raise BadHost(f"{host} is not a valid host name")
    return ascii_host


def split_url(url: str) -> tuple[str, int]:
    """(host as written, port) of an http(s) URL, as the engine reads it (``urlsplit``). Characters
    that parsers disagree about (backslashes, spaces, control characters) are refused, not guessed."""
    if any(ch == "\\" or ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        raise BadHost("the URL contains a backslash, a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BadHost(f"the URL is malformed ({exc})") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise BadHost("not an http:// or https:// URL")
    if not parts.hostname:
        raise BadHost("the URL has no host")
    return parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _embedded(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    for network, form, shift in _EMBEDDING:
        if address in network:
            return form, ipaddress.IPv4Address((int(address) >> shift) & 0xFFFFFFFF)
    return None


def _rule(address: IPAddress) -> str | None:
    """What a refused address is (``a private address (10.0.0.0/8)``), or None for a public one."""
    for network, what in _RULES:
        if address.version == network.version and address in network:
            return what if network.prefixlen == network.max_prefixlen else f"{what} ({network})"
    if address.version == 6:
        embedded = _embedded(address)
        if embedded is not None:
            form, v4 = embedded
            inner = _rule(v4)
            return f"{form} form of {v4}, {inner}" if inner else None
    if address.is_multicast or address.is_reserved or address.is_private or not address.is_global:
        return "a reserved address (not globally reachable)"
    return None


def show(address: IPAddress) -> str:
    """An address as people write it: IPv4-mapped ones with their IPv4 dotted (``::ffff:10.0.0.1``)."""
    if address.version == 6 and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


def refusal(address: IPAddress) -> str | None:
    """Why an address is refused (``10.0.0.1 is a private address (10.0.0.0/8)``), None if public."""
    what = _rule(address)
    return f"{show(address)} is {what}" if what else None


class Policy:
    """The rule above with one operator allow-list. ``check_url`` / ``check_host`` resolve once."""

    def __init__(self, allow_networks: Iterable[str | IPNetwork] = ()) -> None:
        self.allowed_networks: list[IPNetwork] = []
        for net in allow_networks:
            is_network = isinstance(net, ipaddress.IPv4Network | ipaddress.IPv6Network)
            self.allowed_networks += [net] if is_network else parse_networks([net])

    def allowed_by(self, address: IPAddress) -> IPNetwork | None:
        """The allow-list network that holds the address (or, for an IPv4-mapped one, its IPv4)."""
        candidates = [address]
        if address.version == 6 and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        for network in self.allowed_networks:
            if any(c.version == network.version and c in network for c in candidates):
                return network
        return None

    def judge(self, addresses: list[IPAddress], name: str = "") -> tuple[bool, str]:
        """(allowed, reason) for a host's addresses (``name``: the host name they were resolved from):
        refused when any one is refused."""
        notes = []
        for address in addresses:
            what = _rule(address)
            if what is None:
                continue
            said = f"{name} resolves to {show(address)}, {what}" if name else f"{show(address)} is {what}"
            network = self.allowed_by(address)
            if network is None:
                return False, f"{said}; {HINT}"
            notes.append(f"{said}, allowed by {ALLOW_ENV} ({network})")
        if notes:
            return True, "; ".join(notes)
        shown = ", ".join(show(address) for address in addresses)
        if not name:
            return True, f"{shown} is a public address"
        return True, f"{name} resolves to {shown}, public"

    def check_url(self, url: str, resolver: Resolver | None = None) -> Decision:
        try:
            host, port = split_url(url)
        except BadHost as exc:
            return Decision(url, "", None, reason=str(exc))
        return self._check(url, host, port, resolver)

    def check_host(self, host: str, port: int, resolver: Resolver | None = None) -> Decision:
        """An SSH server (or any host and port that is not a URL)."""
        if any(ord(ch) <= 0x20 or ch in "/\\@?#" for ch in host):
            return Decision(f"{host}:{port}", host, port, reason=f"{host!r} is not a host name or address")
        return self._check(f"{host}:{port}", host, port, resolver)

    def _check(self, url: str, host: str, port: int, resolver: Resolver | None) -> Decision:
        try:
            name = normalise_host(host)
        except BadHost as exc:
            return Decision(url, host, port, reason=str(exc))
        if not isinstance(name, str):
            allowed, reason = self.judge([name])
            return Decision(url, show(name), port, [show(name)], allowed, reason)
        try:
            addresses = resolve(name, port, resolver or socket.getaddrinfo)
        except OSError as exc:
            return Decision(url, name, port, reason=f"cannot resolve {name}: {exc}")
        allowed, reason = self.judge(addresses, name)
        return Decision(url, name, port, [show(a) for a in addresses], allowed, reason)


def resolve(name: str, port: int, resolver: Resolver) -> list[IPAddress]:
    """Every address of a name, in the resolver's order, once each (zone ids dropped)."""
    try:
        infos = resolver(name, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:
        raise OSError(str(exc)) from None
    addresses: list[IPAddress] = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OSError("no address")
    return addresses


def is_address(host: str) -> bool:
    """Whether ``host`` is an IP address (no name: nothing to check a certificate or SNI against)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
