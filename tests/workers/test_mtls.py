"""The tls_mtls arm against real servers asking for client certificates of their own test CA — Debian's
nginx (OpenSSL, on its TLS port) and Caddy (Go, on a port of its own, as the demo does): the
certificate exchanged is read from the server's access log (nginx's $ssl_client_verify and
$ssl_client_s_dn, Caddy's request.tls.client_common_name), on both TLS libraries; a server that does
not ask, or rejects the certificate, fails the arm's check with what the server said."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from bench.nginx import Nginx, find_binary
from portal.lib.runs.protocol import ArmSpec, EngineConfig
from portal.lib.tls import certs, clientcerts
from tests import stacks
from tests.workers.test_engine import arm_results, config
from workers.engine.http.endpoint import Endpoint
from workers.engine.matrix import variants
from workers.engine.preflight import PreflightFailed, preflight
from workers.engine.tls import mtls

pytestmark = pytest.mark.skipif(find_binary() is None, reason="nginx not installed")
LOG = "$ssl_client_verify|$ssl_client_s_dn|$ssl_protocol|$status"


@pytest.fixture(scope="module")
def ca():
    return certs.make_ca()


@pytest.fixture(scope="module")
def pairs(ca):
    return {
        "rsa": certs.make_client_cert(ca, "mtls-rsa", "rsa"),
        "ecdsa": certs.make_client_cert(ca, "mtls-ecdsa", "ec"),
    }


def with_certs(base: dict, pairs: dict, kinds=("rsa", "ecdsa")) -> dict:
    return {**base, "client_certs": {k: {"cert": pairs[k][0], "key": pairs[k][1]} for k in kinds}}


def log_of(nginx: Nginx) -> list[list[str]]:
    """The TLS port's lines (the plain port answered the start-up check)."""
    return [fields for line in nginx.access_log_lines() if (fields := line.split("|"))[2] != "-"]


@pytest.mark.parametrize("library", ["system", "bundled"])
@pytest.mark.parametrize("stack", stacks.STACKS)
def test_tls_mtls_presents_the_certificate_the_server_verifies(engine, ca, pairs, library, stack):
    # nginx asks every client on its TLS port (optional); Caddy requires one on a port of its own.
    verify = "optional" if stack == "nginx" else "on"
    with stacks.start(stack, client_ca_pem=ca[0], verify_client=verify, mtls_port=True) as server:
        run = config(("tls_new", server.tls_url()), ("tls_mtls", server.mtls_url()), duration_s=0.8, rate=40)
        messages, code, stderr = engine({**with_certs(run, pairs), "tls_library": library})
        assert code == 0, (stderr, messages[-2:])
        served = [line for line in server.served() if line.tls]
    results = arm_results(messages)
    mtls, new = results["tls_mtls"], results["tls_new"]
    assert mtls["requests"] > 10 and mtls["connections_opened"] == mtls["requests"]
    assert mtls["tls_sessions_reused"] == 0
    verified = [line for line in served if line.client]
    without = [line for line in served if not line.client]
    # Every tls_mtls request (preflight, check, warm-up, window) came with the RSA certificate (the
    # arm's choice when the target holds both); every tls_new one without any.
    assert len(verified) >= 2 + mtls["warmup_requests"] + mtls["requests"]
    assert {line.client for line in verified} == {"mtls-rsa"}
    assert not any(line.resumed for line in verified)
    assert len(without) >= 1 + new["warmup_requests"] + new["requests"]
    assert {line.status for line in verified if line.method == "GET"} == {200}
    if stack == "caddy":  # the certificate went to the mTLS port only, the other arm's never did
        assert {line.port for line in verified} == {server.mtls_port}
        assert server.mtls_port not in {line.port for line in without}


def preflight_error(run: dict) -> str:
    """The arm's preflight as the engine runs it (in this process: faster than an engine's start)."""
    cfg = EngineConfig.from_dict(run)
    with pytest.raises(PreflightFailed) as failed:
        preflight(cfg, cfg.arms[0], {})
    return str(failed.value)


def test_a_server_that_does_not_ask_fails_the_check(pairs):
    with Nginx(access_log_format=LOG) as nginx:
        error = preflight_error(with_certs(config(("tls_mtls", nginx.tls_url())), pairs))
        assert not log_of(nginx)  # judged after the handshake: no request was sent
    assert "did not ask for a client certificate" in error and "ssl_verify_client" in error


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_a_certificate_of_another_ca_is_rejected_with_the_servers_answer(ca, library):
    stranger = certs.make_client_cert(certs.make_ca("Another CA"), "stranger", "rsa")
    with Nginx(client_ca_pem=ca[0], verify_client="on", access_log_format=LOG) as nginx:
        run = {**config(("tls_mtls", nginx.tls_url())), "tls_library": library}
        error = preflight_error(with_certs(run, {"rsa": stranger}, ("rsa",)))
        lines = log_of(nginx)
    # nginx finishes the handshake and answers 400 "The SSL certificate error": the reason says so.
    assert "answered 400" in error and "The SSL certificate error" in error
    assert "did the server reject it?" in error
    assert lines and all(line[0].startswith("FAILED") and line[1] == "CN=stranger" for line in lines)
    assert {line[3] for line in lines} == {"400"}


@pytest.mark.parametrize("library", ["system", "bundled"])
def test_a_tls_alert_is_the_reason_when_the_server_refuses_in_the_handshake(pairs, tls_cert, library):
    """A server that refuses at the TLS level (as OpenSSL with VERIFY_FAIL_IF_NO_PEER_CERT does): the
    check names the alert. The server here is Python's ssl asking for certificates of another CA."""
    other = certs.make_ca("Server's CA")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(*tls_cert)
    server_ctx.load_verify_locations(cadata=other[0])
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            server_ctx.wrap_socket(conn, server_side=True).close()
        except (OSError, ssl.SSLError):
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    run = {**config(("tls_mtls", f"https://127.0.0.1:{port}/")), "tls_library": library}
    cfg = EngineConfig.from_dict(with_certs(run, pairs))
    endpoint = Endpoint("https", "127.0.0.1", port, "127.0.0.1", f"127.0.0.1:{port}")
    with pytest.raises(mtls.Rejected, match="rejected the client certificate with an alert: .*unknown ca"):
        mtls.check(cfg, endpoint, "rsa")
    thread.join(5)
    listener.close()


def test_the_pair_is_checked_and_its_facts_are_public(pairs):
    cert = clientcerts.load_pair(*pairs["ecdsa"])
    assert cert.key_type == "ecdsa" and cert.subject == "CN=mtls-ecdsa"
    assert "PRIVATE" not in str(cert.facts()) and len(cert.fingerprint_sha256) == 95
    with pytest.raises(clientcerts.ClientCertError, match="does not belong"):
        clientcerts.load_pair(pairs["rsa"][0], pairs["ecdsa"][1])
    with pytest.raises(clientcerts.ClientCertError, match="not PEM"):
        clientcerts.load_pair("hello", pairs["rsa"][1])


@pytest.mark.parametrize("stack", stacks.STACKS)
def test_the_matrix_client_cert_variants_present_none_rsa_and_ecdsa_as_the_server_saw(
    engine, ca, pairs, stack
):
    """The ``client_cert`` dimension against a server asking (optional: nginx's ``ssl_verify_client
    optional``, Caddy's ``verify_if_given``) for certificates of the CA that signed both pairs: each
    variant's requests reach it with the certificate it names, read from its access log in the order
    the sub-arms ran (nocc, ccrsa, ccecdsa after tls_new)."""
    with stacks.start(stack, client_ca_pem=ca[0], verify_client="optional") as server:
        run = config(("tls_new", server.tls_url()), users=1, warmup_s=0.2, duration_s=0.5, rate=30)
        messages, code, stderr = engine({**with_certs(run, pairs), "tls_matrix": ["client_cert"]})
        assert code == 0, (stderr, messages[-2:])
        lines = [line for line in server.served() if line.tls]
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    variants = {v["name"]: v for v in matrix["variants"]}
    names = ["tls_new@nocc", "tls_new@ccrsa", "tls_new@ccecdsa"]
    assert list(variants) == names and {v["status"] for v in variants.values()} == {"measured"}
    # The probe read the server's CertificateRequest on each (optional: it asks every client).
    assert all(v["negotiated"]["client_cert_requested"] is True for v in variants.values())
    results = arm_results(messages)
    # Every certificate the server saw was its CA's and verified; none presented by tls_new or nocc.
    who = {"": "none", "mtls-rsa": "rsa", "mtls-ecdsa": "ecdsa"}
    seen = [who.get(line.client, line.client) for line in lines]
    assert set(seen) == {"none", "rsa", "ecdsa"}, set(seen)
    # The arms ran one after the other: the log ends in three blocks, the last two a variant's each, the
    # first tls_new's and nocc's (no certificate either), each at least those arms' warm-up and window
    # (requests cut off at a stop, or answered between the warm-up and the window, add up to three
    # per arm: 19 in ccrsa's warm-up and window, 21 lines here). Before them, the probes' handshakes.
    blocks: list[list] = []
    for kind in seen:
        if blocks and blocks[-1][0] == kind:
            blocks[-1][1] += 1
        else:
            blocks.append([kind, 1])
    assert [kind for kind, _ in blocks[-3:]] == ["none", "rsa", "ecdsa"], blocks
    done = {name: results[name]["warmup_requests"] + results[name]["requests"] for name in results}
    assert min(done.values()) >= 5, done
    for (_, count), arms in zip(blocks[-3:], (("tls_new", names[0]), names[1:2], names[2:]), strict=True):
        expected = sum(done[name] for name in arms)
        assert expected <= count <= expected + 3 * len(arms), (arms, count, expected, blocks)
    # Before the windows, each presenting variant presented its own certificate once (its probe).
    assert [kind for kind, _ in blocks[:-3] if kind != "none"] == ["rsa", "ecdsa"], blocks


def test_a_variant_the_server_does_not_ask_for_or_the_target_lacks_is_refused_with_the_reason(pairs):
    """Probed as the engine does before any window (``variants.expand``), in this process."""
    with Nginx(access_log_format=LOG) as nginx:  # asks for no client certificate
        endpoint = Endpoint("https", "127.0.0.1", nginx.tls_port, "127.0.0.1", f"127.0.0.1:{nginx.tls_port}")
        rsa_only = {"rsa": {"cert": pairs["rsa"][0], "key": pairs["rsa"][1]}}
        sub_arms, entries = variants.expand(
            ArmSpec("tls_new", nginx.tls_url()), endpoint, ["client_cert"], False, 5, client_certs=rsa_only
        )
    found = {e["name"]: e for e in entries}
    assert [sub.spec.name for sub in sub_arms] == ["tls_new@nocc"]
    assert found["tls_new@nocc"]["negotiated"]["client_cert_requested"] is False
    assert found["tls_new@ccrsa"]["status"] == "refused"
    assert "did not ask for a client certificate" in found["tls_new@ccrsa"]["detail"]
    assert "tls_new@ccrsa would measure a handshake without one" in found["tls_new@ccrsa"]["detail"]
    assert found["tls_new@ccecdsa"]["detail"].startswith("the target holds no ECDSA client certificate")
