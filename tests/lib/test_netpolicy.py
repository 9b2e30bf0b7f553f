"""The outbound address policy as a table: spellings of hosts, each allowed or refused, with and
without the operator's allow-list. Names are answered by stub resolvers; nothing is resolved for
real and no packet is sent."""

from __future__ import annotations

import socket

import pytest

from portal.lib.runs.protocol import ArmSpec, EngineConfig, pin_key
from portal.lib.security.netpolicy import Policy, PolicyError, parse_ipv4, parse_networks

LOOPBACK = ["127.0.0.0/8", "::1/128"]  # what the demo, the tests and CI allow
NAMES = {
    "localhost": ["127.0.0.1", "::1"],
    "intranet.example": ["10.0.0.1"],
    "dual.example": ["93.184.215.14", "10.0.0.1"],  # one public, one private: refused
    "example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "xn--bcher-kva.example": ["93.184.215.14"],  # bücher.example after IDNA
    "metadata.example": ["fd00:ec2::254"],
}


class StubResolver:
    """getaddrinfo for the names above only; counts every call."""

    def __init__(self, names: dict[str, list[str]] | None = None) -> None:
        self.names = NAMES if names is None else names
        self.asked: list[str] = []

    def __call__(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - getaddrinfo's names
        self.asked.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, f"stub: no such name {host}")
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in self.names[host]
        ]


A, R = "allowed", "refused"
# (URL, without the allow-list, with 127.0.0.0/8 and ::1/128, text the reason or address must hold)
TABLE = [
    # Loopback in every spelling: refused by default, allowed by the allow-list.
    ("http://127.0.0.1/", R, A, "127.0.0.1 is a loopback address"),
    ("http://127.1/", R, A, "127.0.0.1"),
    ("http://127.0.1/", R, A, "127.0.0.1"),
    ("http://2130706433/", R, A, "127.0.0.1"),
    ("http://0x7f000001/", R, A, "127.0.0.1"),
    ("http://0x7f.1/", R, A, "127.0.0.1"),
    ("http://0X7F.0.0.1:8080/", R, A, "127.0.0.1"),
    ("http://017700000001/", R, A, "127.0.0.1"),
    ("http://0177.0.0.1/", R, A, "127.0.0.1"),
    ("http://127.0.0.1./", R, A, "127.0.0.1"),
    ("http://127.255.255.254/", R, A, "127.255.255.254"),
    ("http://[::1]/", R, A, "::1 is a loopback address"),
    ("https://[0:0:0:0:0:0:0:1]:8443/", R, A, "::1"),
    ("http://[::ffff:127.0.0.1]/", R, A, "IPv4-mapped form of 127.0.0.1"),
    ("http://１２７.０.０.１/", R, A, "127.0.0.1"),
    ("http://127。0。0。1/", R, A, "127.0.0.1"),
    ("http://10.0.0.1@127.0.0.1/", R, A, "127.0.0.1"),
    ("http://localhost/", R, A, "localhost resolves to"),
    ("http://LOCALHOST./", R, A, "localhost resolves to"),
    ("http://ｌｏｃａｌｈｏｓｔ:8081/", R, A, "localhost resolves to"),
    # Everything else internal: refused, allow-list or not.
    ("http://10.0.0.1/", R, R, "10.0.0.1 is a private address (10.0.0.0/8)"),
    ("http://127.0.0.1@10.0.0.1/", R, R, "10.0.0.1 is a private address"),
    ("http://10.1/", R, R, "10.0.0.1 is a private address"),
    ("http://172.16.5.4/", R, R, "172.16.5.4 is a private address"),
    ("http://192.168.1.1/", R, R, "192.168.1.1 is a private address"),
    ("http://169.254.169.254/latest/meta-data/", R, R, "169.254.169.254 is a cloud metadata address"),
    ("http://0xa9.0xfe.0xa9.0xfe/", R, R, "169.254.169.254 is a cloud metadata"),
    ("http://2852039166/", R, R, "169.254.169.254 is a cloud metadata"),
    ("http://0251.0376.0251.0376/", R, R, "169.254.169.254 is a cloud metadata"),
    ("http://169.254.1.1/", R, R, "169.254.1.1 is a link-local address"),
    ("http://100.64.0.1/", R, R, "100.64.0.1 is a carrier-grade NAT address"),
    ("http://0.0.0.0/", R, R, "0.0.0.0 is an unspecified address"),
    ("http://0/", R, R, "0.0.0.0 is an unspecified address"),
    ("http://0.1.2.3/", R, R, "0.1.2.3 is a 'this network' address"),
    ("http://224.0.0.1/", R, R, "224.0.0.1 is a multicast address"),
    ("http://255.255.255.255/", R, R, "255.255.255.255 is a broadcast address"),
    ("http://240.0.0.1/", R, R, "240.0.0.1 is a reserved address"),
    ("http://198.18.0.1/", R, R, "198.18.0.1 is a benchmarking address"),
    ("http://192.0.2.1/", R, R, "192.0.2.1 is a documentation address"),
    ("http://[::]/", R, R, ":: is an unspecified address"),
    ("http://[fe80::1]/", R, R, "fe80::1 is a link-local address"),
    ("http://[fe80::1%25eth0]/", R, R, "fe80::1 is a link-local address"),
    ("http://[fd12:3456::1]/", R, R, "fd12:3456::1 is a private (unique local) address"),
    ("http://[ff02::1]/", R, R, "ff02::1 is a multicast address"),
    ("http://[2001:db8::1]/", R, R, "2001:db8::1 is a documentation address"),
    ("http://[fd00:ec2::254]/", R, R, "fd00:ec2::254 is a cloud metadata address"),
    ("http://[::ffff:10.0.0.1]/", R, R, "::ffff:10.0.0.1 is an IPv4-mapped form of 10.0.0.1, a private"),
    ("http://[::ffff:a9fe:a9fe]/", R, R, "IPv4-mapped form of 169.254.169.254, a cloud metadata"),
    ("http://[::10.0.0.1]/", R, R, "IPv4-compatible form of 10.0.0.1, a private"),
    ("http://[64:ff9b::10.0.0.1]/", R, R, "NAT64 form of 10.0.0.1, a private"),
    ("http://[64:ff9b::7f00:1]/", R, R, "NAT64 form of 127.0.0.1, a loopback"),  # reached via a gateway
    ("http://[64:ff9b:1::1]/", R, R, "a local-use NAT64 address"),
    ("http://[2002:a9fe:a9fe::1]/", R, R, "6to4 form of 169.254.169.254, a cloud metadata"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", R, R, "a Teredo tunnel address"),
    ("http://intranet.example/", R, R, "intranet.example resolves to 10.0.0.1, a private address"),
    ("http://dual.example/", R, R, "dual.example resolves to 10.0.0.1, a private address"),
    ("http://metadata.example/", R, R, "resolves to fd00:ec2::254, a cloud metadata address"),
    # Spellings no two parsers agree on: refused as malformed, never guessed.
    ("http://1.2.3.4.5/", R, R, "looks like an IPv4 address but is not one"),
    ("http://08.0.0.1/", R, R, "looks like an IPv4 address but is not one"),
    ("http://256.0.0.1/", R, R, "looks like an IPv4 address but is not one"),
    ("http://4294967296/", R, R, "out of range"),
    ("http://127.0.0.1\\@10.0.0.1/", R, R, "backslash"),
    ("http://127.0.0.1 @10.0.0.1/", R, R, "a space"),
    ("http://%31%32%37.0.0.1/", R, R, "looks like an IPv4 address but is not one"),
    ("http://[127.0.0.1]/", R, R, "malformed"),
    ("http://127.0.0.1../", R, R, "not a valid host name"),
    ("http://nowhere.example/", R, R, "cannot resolve nowhere.example"),
    ("ftp://127.0.0.1/", R, R, "not an http:// or https:// URL"),
    # Public addresses: allowed either way, in any spelling.
    ("http://8.8.8.8/", A, A, "8.8.8.8 is a public address"),
    ("http://134744072/", A, A, "8.8.8.8"),
    ("http://[2606:4700:4700::1111]/", A, A, "2606:4700:4700::1111 is a public address"),
    ("http://[::ffff:8.8.8.8]/", A, A, "::ffff:8.8.8.8"),
    ("https://example.com:8443/x", A, A, "example.com resolves to 93.184.215.14, 2606:2800"),
    ("https://EXAMPLE.COM./x", A, A, "example.com resolves to"),
    ("http://bücher.example/", A, A, "xn--bcher-kva.example resolves to 93.184.215.14"),
]


def test_the_table_is_long_enough():
    assert len(TABLE) >= 40
    assert len({url for url, *_ in TABLE}) == len(TABLE)


@pytest.mark.parametrize(("url", "default", "with_list", "text"), TABLE)
def test_address_policy_table(url, default, with_list, text):
    for allow, expected in (([], default), (LOOPBACK, with_list)):
        resolver = StubResolver()
        decision = Policy(allow).check_url(url, resolver=resolver)
        assert decision.allowed is (expected == A), (allow, decision)
        assert text in decision.reason + " ".join(decision.addresses), (allow, decision)
        # A name is resolved once; a numeric spelling never reaches a resolver at all.
        assert len(resolver.asked) <= 1
        if decision.addresses == [decision.host]:
            assert resolver.asked == []
        if not decision.allowed and decision.addresses:
            assert decision.reason.endswith("an operator can allow it with TOLLGATE_ALLOW_NETWORKS")
            assert decision.pinned is None
        if decision.allowed:
            assert decision.pinned == decision.addresses[0]
            assert ("allowed by TOLLGATE_ALLOW_NETWORKS" in decision.reason) is bool(allow and default == R)


def test_numeric_ipv4_spellings_are_read_like_inet_aton():
    for spelling in ("127.0.0.1", "127.1", "127.0.1", "2130706433", "0x7f000001", "017700000001", "0x7f.1"):
        assert str(parse_ipv4(spelling)) == "127.0.0.1"
        assert str(parse_ipv4(spelling)) == socket.inet_ntoa(socket.inet_aton(spelling))
    assert parse_ipv4("example.com") is None
    assert parse_ipv4("1.2.3.4a") is None  # ends in a name: a DNS name, like inet_aton says


def test_the_host_the_engine_would_reach_is_the_one_judged():
    # urlsplit (the engine's parser) and browsers both take the host after the last @.
    decision = Policy(LOOPBACK).check_url("http://127.0.0.1:80@10.0.0.1:8080/")
    assert (decision.host, decision.port, decision.allowed) == ("10.0.0.1", 8080, False)
    assert pin_key("http://127.0.0.1:80@10.0.0.1:8080/") == "10.0.0.1:8080"


def test_a_rebinding_resolver_cannot_move_the_pinned_address():
    answers = iter([["127.0.0.1"], ["10.0.0.1"], ["10.0.0.1"]])

    def rebinding(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in next(answers)]

    policy = Policy(LOOPBACK)
    decision = policy.check_url("http://rebind.test:8081/1k", resolver=rebinding)
    assert decision.allowed and decision.pinned == "127.0.0.1"
    # The same name a moment later points inside: refused, and the first decision still says 127.0.0.1.
    again = policy.check_url("http://rebind.test:8081/1k", resolver=rebinding)
    assert not again.allowed and "rebind.test resolves to 10.0.0.1, a private address" in again.reason
    assert decision.pinned == "127.0.0.1"
    # The engine gets the checked address and is told never to resolve the name itself.
    config = EngineConfig(
        [ArmSpec("plain", "http://rebind.test:8081/1k")], pinned={"rebind.test:8081": "127.0.0.1"}
    )
    config.validate()
    with pytest.raises(ValueError, match="no pinned address for rebind.test:8081"):
        EngineConfig(
            [ArmSpec("plain", "http://rebind.test:8081/1k")], pinned={"other:8081": "127.0.0.1"}
        ).validate()


def test_ssh_hosts_go_through_the_same_rule():
    policy = Policy(LOOPBACK)
    assert policy.check_host("127.0.0.1", 22).pinned == "127.0.0.1"
    assert policy.check_host("[::1]", 2222).pinned == "::1"
    refused = policy.check_host("10.0.0.5", 22)
    assert not refused.allowed and refused.reason.startswith("10.0.0.5 is a private address")
    assert "not a host name" in policy.check_host("127.0.0.1@10.0.0.5", 22).reason
    resolver = StubResolver()
    assert not policy.check_host("intranet.example", 22, resolver=resolver).allowed
    assert resolver.asked == ["intranet.example"]


def test_the_allow_list_takes_cidrs_only():
    assert [str(n) for n in parse_networks(["10.0.0.0/8", " ::1/128 ", ""])] == ["10.0.0.0/8", "::1/128"]
    for bad in ("10.0.0.1/8", "10.0.0.0/33", "intranet", "::1/129"):
        with pytest.raises(PolicyError, match="not a network in CIDR notation"):
            parse_networks([bad])
    # An operator's range allows exactly that range.
    policy = Policy(["10.1.0.0/16"])
    assert policy.check_url("http://10.1.2.3/").allowed
    assert policy.check_url("http://10.1.2.3/").reason == (
        "10.1.2.3 is a private address (10.0.0.0/8), allowed by TOLLGATE_ALLOW_NETWORKS (10.1.0.0/16)"
    )
    assert not policy.check_url("http://10.2.0.1/").allowed


def test_the_decision_prints_the_documented_keys():
    decision = Policy().check_url("http://10.0.0.1:8080/x")
    assert decision.as_dict() == {
        "url": "http://10.0.0.1:8080/x",
        "host": "10.0.0.1",
        "addresses": ["10.0.0.1"],
        "allowed": False,
        "reason": "10.0.0.1 is a private address (10.0.0.0/8); an operator can allow it with "
        "TOLLGATE_ALLOW_NETWORKS",
    }
