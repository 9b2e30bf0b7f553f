"""The TLS matrix's HTTP/2 variants against real servers — nginx (``listen … ssl http2``) and Caddy —
on both TLS libraries: each variant of ``h2_new`` offers h2 alone over ALPN, its probe sends its
request over HTTP/2 and checks resumption there, and a server without h2 refuses every variant with
the reason. What the server saw is read from its access log, not from what the client asked for."""

from __future__ import annotations

import pytest

from portal.lib.runs.protocol import ArmSpec
from tests import stacks
from workers.engine.http.by_protocol import new_client
from workers.engine.http.endpoint import Endpoint
from workers.engine.matrix import variants

LOG = "$server_protocol $ssl_alpn_protocol $ssl_protocol $ssl_session_reused $request_method"


def nginx(**kwargs):
    from bench.nginx import Nginx

    return Nginx(access_log_format=LOG, **kwargs)


def expand(server, library: str, dimensions: list[str], arm: str = "h2_new"):
    url = server.tls_url("/1k")
    return variants.expand(ArmSpec(arm, url), Endpoint.resolve(url), dimensions, False, 5, library)


@pytest.mark.parametrize("library", ["system", "bundled"])
@pytest.mark.parametrize("stack", stacks.STACKS)
def test_h2_new_variants_negotiate_h2_and_resume_over_http2(library, stack):
    with stacks.start(stack) as server:
        subs, entries = expand(server, library, ["protocol", "resumption"])
        sub = next(s for s in subs if s.spec.name == "h2_new@1.3+ticket")
        client = new_client(Endpoint.resolve(sub.spec.url), sub.policy, sub.context, timeout_s=5)
        samples = [client.request(sub.spec.url, "/1k") for _ in range(3)]
        client.close()
        # The last answer's log line may come after the client has read it: wait for the three GETs.
        logged = server.served(until=lambda lines: sum(line.method == "GET" for line in lines) >= 3)
        served = [line for line in logged if line.tls]
    by_name = {e["name"]: e for e in entries}
    refused = {name for name, e in by_name.items() if e["status"] == "refused"}
    # TLS 1.3 resumes by ticket only; Go keeps no session cache, so Caddy resumes TLS 1.2 by ticket only.
    resuming = {"nginx": ("h2_new@1.2+ticket", "h2_new@1.2+sessid", "h2_new@1.3+ticket")}
    resuming["caddy"] = ("h2_new@1.2+ticket", "h2_new@1.3+ticket")
    assert refused == {"h2_new@1.3+sessid"} | ({"h2_new@1.2+sessid"} if stack == "caddy" else set()), by_name
    for sub_arm in subs:
        got = by_name[sub_arm.spec.name]["negotiated"]
        assert got["alpn"] == "h2" and got["protocol"] == f"TLSv{sub_arm.spec.name[7:10]}"
        assert got["session_resumed"] is (not sub_arm.spec.name.endswith("+full") or None)
        assert sub_arm.policy.http2 and sub_arm.policy.new_connection_per_request
    assert sorted(s.spec.name for s in subs if not s.spec.name.endswith("+full")) == sorted(resuming[stack])
    # Every probe's request went over HTTP/2 with ALPN h2, and the server resumed the resuming ones.
    heads = [line for line in served if line.method == "HEAD"]
    assert heads and all((line.proto, line.alpn) == ("HTTP/2.0", "h2") for line in heads)
    assert sum(line.resumed for line in heads) == len(resuming[stack])
    # The resuming sub-arm under load: a new HTTP/2 connection per request, each offering the session
    # its previous connection got (TLS 1.3 tickets arrive before the answer).
    assert all(s.error is None and s.status == 200 and s.alpn == "h2" for s in samples), samples
    assert [s.session_reused for s in samples] == [False, True, True]
    gets = [line for line in logged if line.method == "GET"][-3:]
    assert len(gets) == 3 and all(line.proto == "HTTP/2.0" for line in gets), gets
    # nginx may write a request's line after the client has closed that connection, its TLS variables
    # gone ("-"; seen in CI for the last of the three): such a line says nothing of TLS. Every other
    # says h2 over TLS 1.3, resumed from the second on, and at most one is silent.
    told = [(i, line) for i, line in enumerate(gets) if line.tls]
    assert len(told) >= 2, gets
    assert all((line.alpn, line.tls, line.resumed) == ("h2", "TLSv1.3", i > 0) for i, line in told), gets


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_a_server_without_h2_refuses_every_http2_variant_with_the_reason(library):
    with nginx() as server:
        subs, entries = expand(server, library, ["protocol"])
        kept, kept_entries = expand(server, library, ["protocol"], arm="h2")
        served = [line.split() for line in server.access_log_lines()]
    assert subs == [] and kept == []
    for entry in entries + kept_entries:
        assert entry["status"] == "refused"
        # nginx ends the handshake with its alert (a server that completes it without h2 is refused
        # by ``check_alpn``, below): never a request as HTTP/1.1 instead.
        assert "does not offer HTTP/2 over ALPN with this variant (its handshake alert" in entry["detail"]
        assert "no application protocol" in entry["detail"].lower().replace("_", " ")
    assert [line for line in served if line[2] != "-"] == []  # (nginx's start-up check: plain HTTP)


def test_a_handshake_without_h2_is_refused_on_an_http2_arm_only():
    for selected in ("http/1.1", None):
        with pytest.raises(variants.Refused, match="does not offer HTTP/2 over ALPN with this variant"):
            variants.check_alpn("h2_new", selected)
        variants.check_alpn("tls_new", selected)
    variants.check_alpn("h2", "h2")
