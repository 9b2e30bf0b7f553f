"""The matrix's client contexts and probing handshakes against the tests' own TLS server (no nginx):
what is negotiated is read from the handshake messages, and what cannot be made is refused."""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import pytest

from workers.engine.http.endpoint import Endpoint
from workers.engine.matrix import variants


def endpoint(server) -> Endpoint:
    parts = urlsplit(server.url())
    return Endpoint("https", parts.hostname, parts.port, parts.hostname, f"{parts.hostname}:{parts.port}")


def variant(**chosen) -> dict:
    return {"protocol": None, "group": None, "cert": None, "resumption": None} | chosen


@pytest.mark.parametrize(
    ("protocol", "group"), [("tls1.2", "p256"), ("tls1.3", "x25519"), ("tls1.3", "p256")]
)
def test_the_probe_reads_protocol_group_and_chain_from_the_handshake(tls_server, protocol, group):
    wanted = variant(protocol=protocol, group=group, cert="rsa" if protocol == "tls1.2" else None)
    context = variants.build_context(wanted, verify=False)
    negotiated = variants.negotiate(endpoint(tls_server), context, wanted, timeout_s=5)
    assert negotiated["protocol"] == {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}[protocol]
    # As OpenSSL prints it (SSL_get0_group_name), as the bundled library's probe reads it.
    assert negotiated["group"] == {"p256": "secp256r1", "x25519": "x25519"}[group]
    assert negotiated["cert_key_type"] == "RSA" and negotiated["chain_length"] == 1
    assert negotiated["chain_bytes"] > 300 and negotiated["server_flight_bytes"] > negotiated["chain_bytes"]
    assert context._msg_callback is None  # never left on for the load


def test_resumption_variants_are_checked_by_a_second_handshake(tls_server):
    ticket = variant(protocol="tls1.2", resumption="ticket")
    context = variants.build_context(ticket, verify=False)
    assert not context.options & ssl.OP_NO_TICKET
    assert variants.negotiate(endpoint(tls_server), context, ticket, timeout_s=5)["session_resumed"] is True
    assert variants.policy(ticket).resume_sessions and variants.policy(ticket).new_connection_per_request
    # This server (Python's ssl) keeps no session-ID cache: without tickets it never resumes, and the
    # variant is refused for it instead of being measured as full handshakes (nginx resumes both:
    # tests/runs/test_tls_matrix.py).
    ids = variant(protocol="tls1.2", resumption="session_id")
    context = variants.build_context(ids, verify=False)
    assert context.options & ssl.OP_NO_TICKET
    with pytest.raises(variants.Refused, match=r"did not resume the session \(session_id\)"):
        variants.negotiate(endpoint(tls_server), context, ids, timeout_s=5)
    assert tls_server.counters.snapshot()["resumed"] >= 1  # the ticket variant, as the server saw it
    assert not variants.policy(variant(protocol="tls1.3"), "tls").new_connection_per_request


def test_what_cannot_be_made_is_refused_with_the_reason(tls_server):
    if "MLKEM" not in ssl.OPENSSL_VERSION and ssl.OPENSSL_VERSION_INFO[:2] < (3, 5):
        with pytest.raises(variants.Refused, match=r"the generator's OpenSSL 3\.\d\.x lacks X25519MLKEM768"):
            variants.build_context(variant(group="x25519mlkem768"), verify=False)
    # The server holds an RSA certificate only: an ECDSA one cannot be had in TLS 1.2 …
    ecdsa = variant(protocol="tls1.2", group="p256", cert="ecdsa")
    with pytest.raises(variants.Refused, match="server refused the handshake"):
        variants.negotiate(
            endpoint(tls_server), variants.build_context(ecdsa, verify=False), ecdsa, timeout_s=5
        )
    # … nor in TLS 1.3, where Python's ssl cannot choose: refused as the library's lack, with the way out.
    ecdsa13 = variant(cert="ecdsa")
    with pytest.raises(variants.Refused, match="the server chose RSA; needs the bundled TLS library"):
        variants.negotiate(
            endpoint(tls_server), variants.build_context(ecdsa13, verify=False), ecdsa13, timeout_s=5
        )
    ids13 = variant(protocol="tls1.3", resumption="session_id")
    with pytest.raises(variants.Refused, match="ticket only"):
        variants.negotiate(
            endpoint(tls_server), variants.build_context(ids13, verify=False), ids13, timeout_s=5
        )


def test_a_group_refusal_says_whether_openssl_or_pythons_ssl_lacks_it():
    lacks = variants.group_refusal("X25519MLKEM768", (3, 0, 13), "set_ecdh_curve")
    assert (
        lacks == "the generator's OpenSSL 3.0.x lacks X25519MLKEM768 (ML-KEM hybrids came with OpenSSL 3.5)"
    )
    # OpenSSL 3.5 has the hybrid; Python's set_ecdh_curve (before 3.15's set_groups) cannot offer it,
    # and the reason must not blame OpenSSL.
    api = variants.group_refusal("X25519MLKEM768", (3, 5, 1), "set_ecdh_curve")
    assert "OpenSSL 3.5.x has X25519MLKEM768" in api and "Python's ssl cannot offer it" in api
    assert "lacks" not in api
