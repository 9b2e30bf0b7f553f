"""The engine's TLS arms, resumption, TLS matrix and HTTP/2 arms against two real TLS stacks — nginx on
OpenSSL 3.0 and Caddy on Go's crypto/tls — each checked against what the server logged
(``tests/stacks.py``: protocol, ALPN, TLS version, resumed session, cipher suite per request), not
against what the client believes. Arms that share a server ask for pages of their own, so the log
tells them apart by path."""

from __future__ import annotations

import pytest

from tests import stacks
from tests.workers.test_engine import arm_results, config

# Quick arms: a few dozen requests each are enough to count on the server's side.
QUICK = {"users": 2, "warmup_s": 0.3, "duration_s": 1.0, "rate": 40}


def by_uri(served: list[stacks.Served], uri: str, tls: bool = True) -> list[stacks.Served]:
    """The GETs of ``uri`` over TLS (or over plain HTTP: the start-up checks ask the plain port)."""
    return [line for line in served if line.uri == uri and line.method == "GET" and bool(line.tls) == tls]


@pytest.mark.parametrize("tickets", [True, False], ids=["tickets", "no-resumption"])
@pytest.mark.parametrize("stack", stacks.STACKS)
def test_tls_arms_as_the_server_served_them(engine, stack, tickets):
    with stacks.start(stack, tickets=tickets) as server:
        run = config(
            ("tls", server.tls_url("/1k")),
            ("tls_new", server.tls_url("/2k")),
            ("tls_resumed", server.tls_url("/4k")),
            **QUICK,
        )
        messages, code, stderr = engine(run)
        served = server.served()
    assert code == 0, stderr
    results = arm_results(messages)
    keep, new, resumed = (results[arm] for arm in ("tls", "tls_new", "tls_resumed"))
    # tls: the users' warm connections (and the preflight's) carried every request, over TLS 1.3.
    warm = by_uri(served, "/1k")
    assert len(warm) >= keep["warmup_requests"] + keep["requests"] > 20
    assert {line.tls for line in warm} == {"TLSv1.3"} and {line.alpn for line in warm} == {"http/1.1"}
    assert len({line.connection for line in warm}) <= QUICK["users"] + 1
    # tls_new: a connection and a full handshake per request, never a resumed session.
    fresh = by_uri(served, "/2k")
    assert len(fresh) >= new["warmup_requests"] + new["requests"] > 20
    assert not any(line.resumed for line in fresh) and new["tls_sessions_reused"] == 0
    assert len({line.connection for line in fresh}) == len(fresh)
    # tls_resumed: every connection after a user's first resumed its session, as the server says; a
    # server that cannot resume resumed none, and the client says the same.
    again = by_uri(served, "/4k")
    assert len({line.connection for line in again}) == len(again)
    server_resumed = sum(line.resumed for line in again)
    if tickets:
        assert resumed["tls_sessions_reused"] == resumed["requests"] > 20
        assert server_resumed >= resumed["requests"]
    else:
        assert server_resumed == 0 and resumed["tls_sessions_reused"] == 0


# The one group each server accepts here: nginx's OpenSSL 3.0 has no hybrid; Caddy negotiates it.
ONLY_GROUP = {"nginx": ("X25519", "x25519"), "caddy": ("x25519mlkem768", "mlkem")}


@pytest.mark.parametrize("stack", stacks.STACKS)
def test_the_bundled_group_matrix_measures_what_the_server_accepts(engine, stack):
    """The server accepts one key-exchange group: the matrix measures exactly that variant (on Caddy
    the post-quantum hybrid X25519MLKEM768, measured, not refused) and the others are refused by the
    server's own alert; every request of the measured sub-arm reached the server over TLS 1.3."""
    group, variant = ONLY_GROUP[stack]
    with stacks.start(stack, groups=(group,)) as server:
        run = config(("tls_new", server.tls_url("/2k")), users=1, warmup_s=0.2, duration_s=0.6, rate=30)
        messages, code, stderr = engine({**run, "tls_library": "bundled", "tls_matrix": ["group"]})
        served = server.served()
    assert code == 0, stderr
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    entries = {v["name"]: v for v in matrix["variants"]}
    measured = {name for name, e in entries.items() if e["status"] == "measured"}
    assert measured == {f"tls_new@{variant}"}, entries
    for name in set(entries) - measured:
        assert "the server refused the handshake" in entries[name]["detail"], entries[name]
    got = entries[f"tls_new@{variant}"]["negotiated"]["group"]
    assert got == {"x25519": "x25519", "mlkem": "X25519MLKEM768"}[variant]
    results = arm_results(messages)
    fresh = by_uri(served, "/2k")
    sub = results[f"tls_new@{variant}"]
    assert sub["failures"] == 0 and sub["requests"] > 5
    # The tls_new arm (default groups) and the sub-arm: all the server could speak was its one group.
    assert len(fresh) >= sum(r["warmup_requests"] + r["requests"] for r in results.values())
    assert {line.tls for line in fresh} == {"TLSv1.3"}


@pytest.mark.parametrize("stack", stacks.STACKS)
def test_the_certificate_and_protocol_matrix_as_the_server_saw_it(engine, stack):
    """Both servers hold an RSA and an ECDSA certificate: each ``cert`` variant gets the one it asks
    for (the bundled library's signature algorithms), each ``protocol`` variant its TLS version, and
    under TLS 1.2 the server's own cipher suites say which certificate authenticated each request."""
    with stacks.start(stack) as server:
        run = config(("tls_new", server.tls_url("/2k")), users=1, warmup_s=0.2, duration_s=0.6, rate=30)
        messages, code, stderr = engine({**run, "tls_library": "bundled", "tls_matrix": ["protocol", "cert"]})
        served = server.served()
    assert code == 0, stderr
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    entries = {v["name"]: v for v in matrix["variants"]}
    wanted = {f"tls_new@{p}+{c}" for p in ("1.2", "1.3") for c in ("rsa", "ecdsa")}
    assert {n for n, e in entries.items() if e["status"] == "measured"} == wanted, entries
    for name in wanted:
        got = entries[name]["negotiated"]
        assert got["cert_key_type"] == {"rsa": "RSA", "ecdsa": "EC"}[name.rsplit("+", 1)[1]], name
        assert got["protocol"] == f"TLSv{name[8:11]}", name
    results = arm_results(messages)
    tls12 = [line for line in by_uri(served, "/2k") if line.tls == "TLSv1.2"]
    for cert in ("rsa", "ecdsa"):
        sub = results[f"tls_new@1.2+{cert}"]
        assert sub["failures"] == 0 and sub["requests"] > 5
        assert sum(line.cert == cert for line in tls12) >= sub["warmup_requests"] + sub["requests"]
    assert {line.cert for line in tls12} == {"rsa", "ecdsa"}
    tls13 = [line for line in by_uri(served, "/2k") if line.tls == "TLSv1.3"]
    assert len(tls13) >= sum(
        results[f"tls_new@1.3+{c}"]["requests"] + results[f"tls_new@1.3+{c}"]["warmup_requests"]
        for c in ("rsa", "ecdsa")
    )


@pytest.mark.parametrize("stack", stacks.STACKS)
def test_http2_arms_as_the_server_served_them(engine, stack):
    """h2 on the users' warm connections, h2_new a connection per request, h2c with prior knowledge on
    the plain side: the server logged each request as HTTP/2, with ALPN h2 on TLS."""
    with stacks.start(stack) as server:
        run = config(
            ("h2", server.tls_url("/1k")),
            ("h2_new", server.tls_url("/2k")),
            ("h2c", server.h2c_url("/4k")),
            **QUICK,
        )
        messages, code, stderr = engine(run)
        served = server.served()
    assert code == 0, stderr
    results = arm_results(messages)
    assert set(results) == {"h2", "h2_new", "h2c"}
    warm, fresh, cleartext = by_uri(served, "/1k"), by_uri(served, "/2k"), by_uri(served, "/4k", tls=False)
    for lines, arm in ((warm, "h2"), (fresh, "h2_new"), (cleartext, "h2c")):
        result = results[arm]
        assert result["failures"] == 0 and result["requests"] > 20, arm
        assert len(lines) >= result["warmup_requests"] + result["requests"], arm
        assert {line.proto for line in lines} == {"HTTP/2.0"}, arm
    assert {line.alpn for line in warm + fresh} == {"h2"} and {line.tls for line in cleartext} == {""}
    assert len({line.connection for line in warm}) <= QUICK["users"] + 1
    assert len({line.connection for line in fresh}) == len(fresh)
    assert results["h2"]["http2"]["alpn"] == {"h2": QUICK["users"]}


# The resumption variants each server honours, tickets on: Go keeps no session cache (no TLS 1.2
# session IDs), and TLS 1.3 resumes by ticket only (a session-ID variant there is never offered).
RESUMING = {
    "nginx": {"tls_new@1.2+ticket", "tls_new@1.2+sessid", "tls_new@1.3+ticket"},
    "caddy": {"tls_new@1.2+ticket", "tls_new@1.3+ticket"},
}


@pytest.mark.parametrize("library", ["system", "bundled"])
@pytest.mark.parametrize("tickets", [True, False], ids=["tickets", "no-resumption"])
@pytest.mark.parametrize("stack", stacks.STACKS)
def test_the_resumption_matrix_follows_what_the_server_resumes(stack, tickets, library):
    """The matrix's ``resumption`` variants, probed as the engine does before any window: a variant is
    measured only when the server resumed its session, as the server logged it; against a server with
    no resumption every resuming variant is refused with the reason, the full handshakes measured."""
    from portal.lib.runs.protocol import ArmSpec
    from workers.engine.http.endpoint import Endpoint
    from workers.engine.matrix import variants

    with stacks.start(stack, tickets=tickets) as server:
        url = server.tls_url("/2k")
        subs, entries = variants.expand(
            ArmSpec("tls_new", url), Endpoint.resolve(url), ["protocol", "resumption"], False, 5, library
        )
        served = [line for line in server.served() if line.tls and line.method == "HEAD"]
    measured = {sub.spec.name for sub in subs}
    full = {"tls_new@1.2+full", "tls_new@1.3+full"}
    assert measured == full | (RESUMING[stack] if tickets else set()), entries
    for entry in entries:
        if entry["name"] not in measured and entry["name"] != "tls_new@1.3+sessid":
            assert "the server did not resume the session" in entry["detail"], entry
    # The server's account of the probes: exactly the measured resuming variants' second handshakes
    # resumed (each probe sends its HEAD on the connection that resumed, or on its one connection).
    assert sum(line.resumed for line in served) == len(measured - full)
