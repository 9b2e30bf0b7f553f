"""The TLS matrix's variants on the bundled library (pyOpenSSL on the cryptography wheel's OpenSSL)
against real servers: the pyOpenSSL test server (hybrid group on, RSA, ECDSA and Ed25519
certificates on one context) and Debian's nginx (OpenSSL 3.0: no hybrid). What was negotiated is
checked from the server's own counters, not only from the client's probe."""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

import pytest
from OpenSSL import SSL

from tests.engine_config import engine_config
from tests.pyossl_server import PyOpenSSLServer
from workers.engine.http.endpoint import Endpoint
from workers.engine.matrix import variants
from workers.engine.tls.libraries import BUNDLED, SYSTEM

OPENSSL_NAMES = {"x25519mlkem768": "X25519MLKEM768", "x25519": "x25519", "p256": "secp256r1"}
KEY_TYPES = {"rsa": "RSA", "ecdsa": "EC", "ed25519": "Ed25519"}


def endpoint(url: str) -> Endpoint:
    parts = urlsplit(url)
    return Endpoint("https", parts.hostname, parts.port, parts.hostname, f"{parts.hostname}:{parts.port}")


def variant(**chosen) -> dict:
    return {"protocol": None, "group": None, "cert": None, "resumption": None} | chosen


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with PyOpenSSLServer(tmp_path_factory.mktemp("pyossl"), key_types=("rsa", "ecdsa", "ed25519")) as srv:
        yield srv


def probe(server, wanted: dict, library: str = BUNDLED) -> dict:
    context = variants.build_context(wanted, verify=False, library=library)
    return variants.negotiate(endpoint(server.url()), context, wanted, timeout_s=5)


@pytest.mark.parametrize("protocol", ["tls1.3", "tls1.2"])
def test_group_and_certificate_are_chosen_and_verified_by_what_the_server_saw(server, protocol):
    before = server.counters.snapshot()
    seen = {}
    for group in ("x25519mlkem768", "x25519", "p256"):
        for cert in ("rsa", "ecdsa", "ed25519"):
            wanted = variant(protocol=protocol, group=group, cert=cert)
            if protocol == "tls1.2" and group == "x25519mlkem768":
                # The hybrid is a TLS 1.3 key exchange (a TLS 1.2 server would fall back to RSA key
                # transport or refuse): refused before any handshake.
                with pytest.raises(variants.Refused, match="TLS 1.2 cannot use it"):
                    probe(server, wanted)
                continue
            if protocol == "tls1.2" and cert == "ecdsa" and group != "p256":
                # TLS 1.2: the one offered group also bounds the ECDSA curves the client accepts.
                with pytest.raises(variants.Refused, match="P-256 certificate needs the p256 group"):
                    probe(server, wanted)
                continue
            got = probe(server, wanted)
            assert got["protocol"] == {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}[protocol]
            assert got["group"] == OPENSSL_NAMES[group]  # as SSL_get0_group_name prints it
            assert got["cert_key_type"] == KEY_TYPES[cert] and got["cert_chosen_by"] == "signature algorithms"
            assert got["client_flight_bytes"] <= got["client_handshake_bytes"]
            assert got["server_flight_bytes"] <= got["server_handshake_bytes"]
            seen[(group, cert)] = got
    after = server.counters.snapshot()
    # The server's own count: one handshake per probe (its HEAD request too), each with the group and
    # the certificate type the probe reported.
    version = {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}[protocol]
    for (group, cert), _ in seen.items():
        key = (version, OPENSSL_NAMES[group], KEY_TYPES[cert])
        assert after["pairs"].get(key, 0) - before["pairs"].get(key, 0) == 1, key
    assert after["handshakes"] - before["handshakes"] == len(seen)
    if protocol == "tls1.3":
        # The hybrid's key shares: the client's ML-KEM-768 encapsulation key (1,184 bytes) besides its
        # X25519 share, the server's ciphertext (1,088 bytes) besides its own: the ClientHello grows by
        # exactly 1,184 bytes, the server's flight by about 1,070 (seen 1,072–1,073: its encrypted
        # extensions and signature differ by a few bytes too).
        hybrid, classic = seen[("x25519mlkem768", "ecdsa")], seen[("x25519", "ecdsa")]
        assert hybrid["client_flight_bytes"] - classic["client_flight_bytes"] == 1184
        assert 1040 <= hybrid["server_handshake_bytes"] - classic["server_handshake_bytes"] <= 1100
        # RSA's chain and signature are larger than ECDSA's, on the server's side only.
        rsa = seen[("x25519", "rsa")]
        assert rsa["server_handshake_bytes"] > classic["server_handshake_bytes"] + 300
        assert rsa["cert_key_bits"] == 2048 and classic["cert_key_bits"] == 256


def test_resumption_and_named_groups_on_the_bundled_library(server):
    before = server.counters.snapshot()["resumed"]
    ticket = variant(protocol="tls1.3", group="x25519mlkem768", resumption="ticket")
    assert probe(server, ticket)["session_resumed"] is True
    ids = variant(protocol="tls1.2", resumption="session_id")
    assert variants.build_context(ids, verify=False, library=BUNDLED).set_options(0) & SSL.OP_NO_TICKET
    assert probe(server, ids)["session_resumed"] is True
    assert server.counters.snapshot()["resumed"] - before == 2  # as the server saw it
    # A group the user named, by any of OpenSSL's names for it; one the library lacks is refused.
    assert probe(server, variant(protocol="tls1.3", group="P-384"))["group"] == "secp384r1"
    with pytest.raises(variants.Refused, match="bundled TLS library .* does not know the group nosuch"):
        variants.build_context(variant(group="nosuch"), verify=False, library=BUNDLED)


def test_the_system_library_refuses_what_it_cannot_do_and_names_the_way_out(server):
    if "MLKEM" not in ssl.OPENSSL_VERSION and ssl.OPENSSL_VERSION_INFO[:2] < (3, 5):
        with pytest.raises(variants.Refused, match=r"lacks X25519MLKEM768.*needs the bundled TLS library"):
            variants.build_context(variant(group="x25519mlkem768"), verify=False, library=SYSTEM)
    under13 = r"cannot choose the certificate under TLS 1\.3.*needs the bundled"
    with pytest.raises(variants.Refused, match=under13):
        variants.build_context(variant(protocol="tls1.3", cert="rsa"), verify=False, library=SYSTEM)
    with pytest.raises(variants.Refused, match="cannot ask for an Ed25519 certificate.*needs the bundled"):
        variants.build_context(variant(protocol="tls1.2", cert="ed25519"), verify=False, library=SYSTEM)
    # Without a protocol, TLS 1.3 is negotiated and the server chooses: ECDSA here (OpenSSL's order),
    # so RSA is refused as the library's lack, not as the server's refusal.
    with pytest.raises(variants.Refused, match=r"the server chose EC; needs the bundled TLS library"):
        probe(server, variant(cert="rsa"), library=SYSTEM)
    # What it can do, it does: TLS 1.2 by cipher suite; group read from the handshake messages.
    got = probe(server, variant(protocol="tls1.2", group="p256", cert="rsa"), library=SYSTEM)
    assert got["group"] == "secp256r1" and got["cert_key_type"] == "RSA"
    assert got["cert_chosen_by"] == "cipher suites" and got["client_handshake_bytes"] > 0
    assert got["server_handshake_bytes"] > got["server_flight_bytes"] > 0


def test_a_server_without_the_hybrid_refuses_it_with_its_own_alert_not_an_error_storm(engine):
    from bench.nginx import Nginx

    try:
        nginx = Nginx(access_log_format="$ssl_protocol $ssl_curve").start()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        hybrid = variant(protocol="tls1.3", group="x25519mlkem768")
        with pytest.raises(variants.Refused, match="the server refused the handshake: .*alert"):
            context = variants.build_context(hybrid, verify=False, library=BUNDLED)
            variants.negotiate(endpoint(nginx.tls_url()), context, hybrid, timeout_s=5)
        # A bundled matrix run: the hybrid refused with nginx's alert and never run; the other groups
        # measured without a failure, as nginx logged them.
        messages, code, stderr = engine(
            engine_config(
                {"tls_new": nginx.tls_url()},
                warmup_s=0.1,
                duration_s=0.3,
                arrival_rate=30,
                tls_library="bundled",
                tls_matrix=["group"],
            )
        )
        logged = nginx.access_log_lines()
    finally:
        nginx.stop()
    assert code == 0, stderr
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    entries = {v["name"]: v for v in matrix["variants"]}
    assert entries["tls_new@mlkem"]["status"] == "refused"
    assert "the server refused the handshake" in entries["tls_new@mlkem"]["detail"]
    assert entries["tls_new@x25519"]["status"] == entries["tls_new@p256"]["status"] == "measured"
    results = {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}
    assert set(results) == {"tls_new", "tls_new@x25519", "tls_new@p256"}
    assert all(r["failures"] == 0 and r["requests"] > 0 for r in results.values())
    assert sum(1 for line in logged if line.split()[-1] == "X25519") >= results["tls_new@x25519"]["requests"]
    assert (
        sum(1 for line in logged if line.split()[-1] == "prime256v1") >= results["tls_new@p256"]["requests"]
    )


def test_client_certificate_variants_on_the_bundled_library_as_the_server_saw_them(engine, tmp_path):
    # The server asks for a client certificate (optional) from its own CA: each client_cert variant
    # presents the run's certificate of its key type, "none" presents none, as the server counted.
    with PyOpenSSLServer(tmp_path, client_ca=True) as server:
        pairs = {}
        for kind in ("rsa", "ecdsa"):
            cert, key = server.client_ca.issue(kind, common_name=f"cc-{kind}")
            pairs[kind] = {"cert": cert.read_text(), "key": key.read_text()}
        messages, code, stderr = engine(
            engine_config(
                {"tls_new": server.url()},
                warmup_s=0.1,
                duration_s=0.3,
                arrival_rate=30,
                tls_library="bundled",
                tls_matrix=["group", "client_cert"],
                tls_groups=["secp384r1"],
                client_certs=pairs,
            )
        )
        seen = server.counters.snapshot()
    assert code == 0, stderr
    (matrix,) = [m for m in messages if m["type"] == "matrix"]
    entries = {v["name"]: v for v in matrix["variants"]}
    assert len(entries) == 4 * 3 and all(e["status"] == "measured" for e in entries.values()), entries
    assert entries["tls_new@secp384r1+ccrsa"]["negotiated"]["group"] == "secp384r1"
    assert all(e["negotiated"]["client_cert_requested"] is True for e in entries.values())
    results = {m["arm"]: m["result"] for m in messages if m["type"] == "arm"}
    for kind in ("rsa", "ecdsa"):
        sent = sum(
            results[f"tls_new@{g}+cc{kind}"]["requests"] for g in ("x25519", "p256", "mlkem", "secp384r1")
        )
        assert seen["client_certs"][f"cc-{kind}"] >= sent
    assert seen["client_certs"]["none"] >= sum(
        r["requests"] for n, r in results.items() if n.endswith("+nocc")
    )
