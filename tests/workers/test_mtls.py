"""The tls_mtls arm against Debian's nginx asking for client certificates of its own test CA: the
certificate exchanged is read from nginx's access log ($ssl_client_verify, $ssl_client_s_dn), on
both TLS libraries; a server that does not ask, or rejects the certificate, fails the arm's check
with what the server said."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from bench.nginx import Nginx, find_binary
from portal.lib import certs, clientcerts
from portal.lib.protocol import EngineConfig
from tests.workers.test_engine import arm_results, config
from workers.engine import mtls
from workers.engine.client import Endpoint
from workers.engine.preflight import PreflightFailed, preflight

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
def test_tls_mtls_presents_the_certificate_nginx_verifies(engine, ca, pairs, library):
    with Nginx(client_ca_pem=ca[0], verify_client="optional", access_log_format=LOG) as nginx:
        run = config(("tls_new", nginx.tls_url()), ("tls_mtls", nginx.tls_url()), duration_s=0.8, rate=40)
        messages, code, stderr = engine({**with_certs(run, pairs), "tls_library": library})
        assert code == 0, (stderr, messages[-2:])
        lines = log_of(nginx)
    results = arm_results(messages)
    mtls, new = results["tls_mtls"], results["tls_new"]
    assert mtls["requests"] > 10 and mtls["connections_opened"] == mtls["requests"]
    assert mtls["tls_sessions_reused"] == 0
    verified = [line for line in lines if line[0] == "SUCCESS"]
    without = [line for line in lines if line[0] == "NONE"]
    # Every tls_mtls request (preflight, check, warm-up, window) came with the RSA certificate (the
    # arm's choice when the target holds both); every tls_new one without any.
    assert len(verified) >= 2 + mtls["warmup_requests"] + mtls["requests"]
    assert {line[1] for line in verified} == {"CN=mtls-rsa"}
    assert len(without) >= 1 + new["warmup_requests"] + new["requests"]
    assert all(line[3] == "200" for line in verified)  # (the TLS-facts probe's HEAD / gets a 404)


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
