"""TLS facts from real handshakes with local servers, and the s_client parser on recorded output."""

from __future__ import annotations

import ssl
from datetime import UTC

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from bench.nginx import Nginx
from portal.lib.tls.certs import make_self_signed
from tests.servers import LocalServer, closed_port
from workers.engine.tls.facts import handshake_facts, parse_s_client


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tlsinfo")
    return {
        "rsa": make_self_signed(directory, name="rsa", common_name="127.0.0.1", key_bits=2048),
        "ec": make_self_signed(directory, name="ec", common_name="127.0.0.1", key_type="ec"),
    }


def der_size(cert_path) -> tuple[int, str]:
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    return len(cert.public_bytes(serialization.Encoding.DER)), cert.not_valid_after_utc.isoformat()


def serve(cert, **context_settings) -> LocalServer:
    server = LocalServer(tls=cert)
    context: ssl.SSLContext = server.httpd.ssl_context
    context.set_alpn_protocols(["http/1.1"])
    for name, value in context_settings.items():
        setattr(context, name, value)
    return server.start()


def test_rsa_tls13_facts(certs):
    server = serve(certs["rsa"])
    try:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    finally:
        server.stop()
    size, not_after = der_size(certs["rsa"][0])
    assert facts["error"] is None and facts["source"] == "openssl s_client"
    assert facts["protocol"] == "TLSv1.3" and facts["cipher"].startswith("TLS_")
    assert (facts["cert_key_type"], facts["cert_key_bits"]) == ("RSA", 2048)
    assert facts["signature_algorithm"] == "sha256WithRSAEncryption"
    assert facts["handshake_signature"].startswith("RSA-PSS")
    assert (facts["chain_length"], facts["chain_bytes"]) == (1, size)
    assert facts["not_after"] == not_after and facts["not_after"].endswith("+00:00")
    assert facts["alpn"] == "http/1.1"
    assert facts["group"]  # e.g. X25519
    assert facts["ocsp_stapled"] is False
    # Python's TLS 1.3 server sends tickets by default, and the probe's reconnect resumed with one.
    assert facts["session_ticket_issued"] is True and facts["session_ticket"] is True
    assert facts["session_resumed"] is True and facts["session_id"] is None  # no session IDs in 1.3
    assert facts["verified"] is None  # not asked
    # The server saw it: a full handshake, then the reconnect that resumed, then the accept probe's
    # short handshakes (tests/workers/test_tls_accepts.py), one connection each.
    seen = server.counters.snapshot()
    assert (seen["connections"], seen["resumed"]) == (2 + facts["accept_probe"]["handshakes"], 1)
    assert facts["accept_probe"]["handshakes"] >= 15 and seen["handshakes"] >= 2


def test_ec_key_and_tls12_without_tickets(certs):
    server = serve(certs["ec"], maximum_version=ssl.TLSVersion.TLSv1_2, options=ssl.OP_NO_TICKET | ssl.OP_ALL)
    try:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    finally:
        server.stop()
    assert facts["protocol"] == "TLSv1.2"
    assert (facts["cert_key_type"], facts["cert_key_bits"]) == ("EC", 256)
    assert facts["signature_algorithm"] == "ecdsa-with-SHA256"
    assert facts["session_ticket_issued"] is False and facts["session_ticket"] is False
    # Python's server keeps no session it can resume (it never sends close_notify, so OpenSSL drops
    # the session from its cache): a reconnect offering the session ID gets a full handshake.
    assert facts["session_id"] is False and facts["session_resumed"] is False
    assert server.counters.snapshot()["resumed"] == 0


def test_verification_against_a_given_ca(certs):
    server = serve(certs["rsa"])
    try:
        untrusted = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=True)
        trusted = handshake_facts(
            "127.0.0.1", server.port, server_name="127.0.0.1", verify=True, cafile=str(certs["rsa"][0])
        )
    finally:
        server.stop()
    assert untrusted["verified"] is False and trusted["verified"] is True


def test_a_closed_port_is_an_error_not_an_exception():
    facts = handshake_facts("127.0.0.1", closed_port(), server_name=None, verify=False, timeout_s=3)
    assert facts["error"] and facts["protocol"] is None


def test_python_fallback_when_openssl_is_missing(certs, monkeypatch):
    monkeypatch.setattr("workers.engine.tls.facts.shutil.which", lambda name: None)
    server = serve(certs["rsa"])
    try:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    finally:
        server.stop()
    assert facts["source"] == "python ssl" and facts["protocol"] == "TLSv1.3"
    assert (facts["cert_key_type"], facts["cert_key_bits"]) == ("RSA", 2048)
    assert facts["session_ticket"] is True and facts["chain_length"] is None
    assert facts["session_resumed"] is True and server.counters.snapshot()["resumed"] == 1


class NewContextPerConnection:
    """A server TLS setup like Gunicorn's default: a new SSLContext, and so a new ticket key, for
    every connection. It issues tickets that no later connection can redeem."""

    def __init__(self, cert, maximum_version: ssl.TLSVersion) -> None:
        self.cert = cert
        self.maximum_version = maximum_version

    def wrap_socket(self, sock, server_side: bool) -> ssl.SSLSocket:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*map(str, self.cert))
        context.maximum_version = self.maximum_version
        return context.wrap_socket(sock, server_side=server_side)


@pytest.mark.parametrize("openssl", [True, False], ids=["s_client", "python"])
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["1.3", "1.2"])
def test_tickets_that_cannot_resume_are_not_claimed(certs, monkeypatch, openssl, version):
    if not openssl:
        monkeypatch.setattr("workers.engine.tls.facts.shutil.which", lambda name: None)
    server = LocalServer(tls=certs["rsa"])
    server.httpd.ssl_context = NewContextPerConnection(certs["rsa"], version)
    server.start()
    try:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    finally:
        server.stop()
    assert facts["error"] is None and facts["protocol"] == (
        "TLSv1.3" if version == ssl.TLSVersion.TLSv1_3 else "TLSv1.2"
    )
    assert facts["session_ticket_issued"] is True  # a ticket came …
    assert facts["session_ticket"] is False and facts["session_resumed"] is False  # … and did not work
    seen = server.counters.snapshot()
    assert seen["resumed"] == 0 and seen["handshakes"] >= 2  # the probe did try to resume


def test_tls12_session_ids_and_tickets_against_nginx():
    """nginx with TLS 1.2 only, a shared session cache and tickets: both ways resume, each tried on
    its own (the session-ID reconnect offers no ticket)."""
    try:
        nginx = Nginx(tls_protocols="TLSv1.2")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with nginx:
        facts = handshake_facts("127.0.0.1", nginx.tls_port, server_name="127.0.0.1", verify=False)
    assert facts["protocol"] == "TLSv1.2" and facts["error"] is None
    assert facts["session_ticket_issued"] is True and facts["session_ticket"] is True
    assert facts["session_id"] is True and facts["session_resumed"] is True


# Hand-written in the format OpenSSL 1.1.1 prints for a TLS 1.2 server (no 'Negotiated TLS1.3 group'
# line; the ECDH temp key names its curve); the certificate block is left out.
OPENSSL_11_TLS12 = """CONNECTED(00000003)
---
Certificate chain
 0 s:CN = example.test
   i:CN = Example CA
---
Server certificate
subject=CN = example.test
---
No client certificate CA names sent
Peer signing digest: SHA256
Peer signature type: RSA-PSS
Server Temp Key: ECDH, prime256v1, 256 bits
---
SSL handshake has read 3127 bytes and written 318 bytes
Verification: OK
---
New, TLSv1.2, Cipher is ECDHE-RSA-AES128-GCM-SHA256
Server public key is 2048 bit
ALPN protocol: http/1.1
OCSP Response Data:
    OCSP Response Status: successful (0x0)
SSL-Session:
    Protocol  : TLSv1.2
    Cipher    : ECDHE-RSA-AES128-GCM-SHA256
    Session-ID: 6A1F0E9C1B2D3E4F5A6B7C8D9E0F1A2B3C4D5E6F7A8B9C0D1E2F3A4B5C6D7E8F
    TLS session ticket lifetime hint: 300 (seconds)
    TLS session ticket:
    0000 - 01 02 03 04 05 06 07 08-09 0a 0b 0c 0d 0e 0f 10   ................
    Verify return code: 0 (ok)
---
"""


def test_parse_openssl_11_output():
    facts = parse_s_client(OPENSSL_11_TLS12)
    assert facts["protocol"] == "TLSv1.2" and facts["cipher"] == "ECDHE-RSA-AES128-GCM-SHA256"
    assert facts["group"] == "prime256v1"
    assert facts["handshake_signature"] == "RSA-PSS+SHA256"
    assert facts["ocsp_stapled"] is True and facts["session_ticket_issued"] is True
    # Issued is not working: only a reconnect can tell, so the parser alone claims neither.
    assert facts["session_ticket"] is None and facts["session_id"] is None
    assert facts["alpn"] == "http/1.1" and facts["verified"] is True
    assert facts["cert_key_type"] is None  # no PEM in this excerpt


def test_parse_openssl_3_group_line():
    text = (
        "New, TLSv1.3, Cipher is TLS_AES_128_GCM_SHA256\n"
        "Negotiated TLS1.3 group: X25519MLKEM768\nNo ALPN negotiated\n"
    )
    facts = parse_s_client(text)
    assert (
        facts["group"] == "X25519MLKEM768"
        and facts["alpn"] is None
        and facts["session_ticket_issued"] is False
    )


def test_not_after_is_utc(certs):
    _, not_after = der_size(certs["ec"][0])
    assert x509.load_pem_x509_certificate(certs["ec"][0].read_bytes()).not_valid_after_utc.tzinfo == UTC
    assert not_after.endswith("+00:00")
