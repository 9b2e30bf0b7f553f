"""What a server accepts (``workers/engine/tls/acceptance.py``, part of the TLS facts), against real
servers: a pyOpenSSL server on the bundled OpenSSL 4.x (the hybrid X25519MLKEM768 on, an RSA and an
ECDSA certificate at once, optionally asking for a client certificate from its own CA) that counts
what each handshake negotiated on its side, and Debian's nginx (OpenSSL 3.0: no hybrid).

The server here is this module's own (a few lines, one thread per connection); the facts are
checked against what the server saw, not only against what the client asked for.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest
from cryptography import x509
from OpenSSL import SSL
from OpenSSL._util import ffi, lib

from bench.nginx import Nginx
from portal.lib.tls.certs import make_self_signed
from workers.engine.tls import libraries
from workers.engine.tls.acceptance import key_type, server_accepts
from workers.engine.tls.facts import handshake_facts

SERVER_GROUPS = "X25519MLKEM768:X25519:P-256"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("accepts")
    return {
        "rsa": make_self_signed(directory, name="rsa", common_name="127.0.0.1", key_bits=2048),
        "ec": make_self_signed(directory, name="ec", common_name="127.0.0.1", key_type="ec"),
        "ca": make_self_signed(
            directory, name="clientca", common_name="Tollgate Test Client CA", key_type="ec"
        ),
    }


class BundledServer:
    """A TLS server on the bundled OpenSSL: both certificates, the groups given, and with
    ``client_ca`` a CertificateRequest naming that CA (``require``: ending a connection without a
    certificate). ``seen`` counts, per completed handshake, ("group", name) and ("cert", key type)
    as the server's own connection reports them, and ("request", True) per request sent."""

    def __init__(
        self,
        certs: dict,
        client_ca=None,
        require: bool = False,
        groups: str = SERVER_GROUPS,
        tls12: bool = False,
    ) -> None:
        context = SSL.Context(SSL.TLS_SERVER_METHOD)
        if tls12:
            context.set_max_proto_version(SSL.TLS1_2_VERSION)
        for kind in ("rsa", "ec"):
            context.use_certificate_file(str(certs[kind][0]))
            context.use_privatekey_file(str(certs[kind][1]))
        assert lib.SSL_CTX_set1_curves_list(context._context, groups.encode()) == 1
        if client_ca is not None:
            mode = SSL.VERIFY_PEER | (SSL.VERIFY_FAIL_IF_NO_PEER_CERT if require else 0)
            context.set_verify(mode, lambda *args: True)
            context.load_verify_locations(str(client_ca))
            context.add_client_ca(x509.load_pem_x509_certificate(client_ca.read_bytes()))
        self.seen: Counter = Counter()
        self._lock = threading.Lock()
        context.set_info_callback(self._info)
        self.context = context
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _info(self, conn: SSL.Connection, where: int, ret: int) -> None:
        if where & SSL.SSL_CB_HANDSHAKE_DONE:
            group = lib.SSL_get0_group_name(conn._ssl)
            cert = conn.get_certificate(as_cryptography=True)
            with self._lock:
                self.seen["group", ffi.string(group).decode() if group != ffi.NULL else None] += 1
                self.seen["cert", key_type(cert.public_key())[0]] += 1
        elif b"write certificate request" in conn.get_state_string() and where & SSL.SSL_CB_LOOP:
            with self._lock:
                self.seen["request", True] += 1

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(sock,), daemon=True).start()

    def _one(self, sock: socket.socket) -> None:
        # Blocking: pyOpenSSL reads the descriptor itself (a timeout would make it non-blocking).
        conn = SSL.Connection(self.context, sock)
        conn.set_accept_state()
        try:
            conn.do_handshake()
            if conn.recv(4096):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            conn.shutdown()
        except (SSL.Error, OSError):
            pass  # a probe that hangs up after its handshake, or a client without a certificate
        finally:
            sock.close()

    def __enter__(self) -> BundledServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.listener.close()


def by_name(rows: list[dict]) -> dict[str, dict]:
    return {row["name"]: row for row in rows}


def test_a_hybrid_capable_dual_certificate_server_on_the_bundled_library(certs):
    with BundledServer(certs, client_ca=certs["ca"][0]) as server:
        facts = handshake_facts("127.0.0.1", server.port, server_name="127.0.0.1", verify=False)
    assert facts["error"] is None and facts["protocol"] == "TLSv1.3"
    # The first handshake's library (s_client's system OpenSSL 3.0) and the accept probe's (bundled 4.x).
    assert facts["tls_library"]["choice"] == "system" and facts["tls_library"]["openssl"].startswith(
        "OpenSSL "
    )
    probe = facts["accept_probe"]
    assert probe["tls_library"] == libraries.describe(libraries.BUNDLED) and probe["error"] is None
    assert probe["protocol"] == "TLSv1.3" and probe["handshakes"] >= 15
    groups = by_name(facts["groups"])
    accepted = {name for name, row in groups.items() if row["accepted"]}
    assert accepted == {"X25519MLKEM768", "X25519", "P-256"}
    assert groups["X25519MLKEM768"]["hybrid"] is True and groups["X25519"]["hybrid"] is False
    assert [groups[g]["negotiated"] for g in ("X25519MLKEM768", "X25519", "P-256")] == [
        "X25519MLKEM768",
        "x25519",
        "secp256r1",
    ]
    # Refused by the server (an alert), not "could not ask".
    assert groups["P-384"]["accepted"] is False and "alert" in groups["P-384"]["reason"]
    assert groups["SecP256r1MLKEM768"]["accepted"] is False
    # The server counts a handshake in its connection's thread when the handshake completes, which
    # may be after the client has moved on (seen on a loaded machine: 2 of 3): wait for the last one.
    deadline = time.monotonic() + 5
    while (server.seen["cert", "RSA"] < 3 or server.seen["cert", "EC"] < 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    # The server's own count: each accepted group negotiated once by the group probe, and more by
    # the other handshakes (its preferred X25519MLKEM768 first where the client offers it).
    assert server.seen["group", "x25519"] >= 1 and server.seen["group", "secp256r1"] >= 1
    assert server.seen["group", "X25519MLKEM768"] >= 1 + 1  # the group probe's, then the bundled defaults
    # Signature algorithms: ECDSA P-256 answered with the EC certificate, RSA-PSS with the RSA one.
    sigalgs = by_name(facts["signature_algorithms"])
    assert (
        sigalgs["ecdsa_secp256r1_sha256"]["accepted"],
        sigalgs["ecdsa_secp256r1_sha256"]["cert_key_type"],
    ) == (
        True,
        "EC",
    )
    assert (sigalgs["rsa_pss_rsae_sha256"]["accepted"], sigalgs["rsa_pss_rsae_sha256"]["cert_key_type"]) == (
        True,
        "RSA",
    )
    assert sigalgs["ed25519"]["accepted"] is False and sigalgs["ecdsa_secp384r1_sha384"]["accepted"] is False
    assert server.seen["cert", "RSA"] >= 3 and server.seen["cert", "EC"] >= 1  # what the server sent
    # The client certificate: asked for, with the CA the server named, and not required.
    assert facts["client_cert_requested"] is True and server.seen["request", True] >= 1
    assert facts["client_ca_names"] == ["CN=Tollgate Test Client CA"]
    assert facts["client_cert_required"] is False


def test_a_server_that_requires_a_client_certificate_shows_its_alert(certs):
    with BundledServer(certs, client_ca=certs["ca"][0], require=True) as server:
        facts = server_accepts(
            "127.0.0.1", server.port, server_name="127.0.0.1", protocol="TLSv1.3", budget_s=10
        )
    assert facts["client_cert_requested"] is True and facts["client_cert_required"] is True
    assert "certificate required" in facts["client_cert_alert"]
    # TLS 1.3: the client's side of each handshake completes before the server's verdict.
    assert by_name(facts["groups"])["X25519MLKEM768"]["accepted"] is True
    # TLS 1.2: every handshake without a certificate ends after the request; what came before it (the
    # group, the certificate) still tells what the server accepted.
    with BundledServer(certs, client_ca=certs["ca"][0], require=True, tls12=True) as server:
        facts = server_accepts(
            "127.0.0.1", server.port, server_name="127.0.0.1", protocol="TLSv1.2", budget_s=10
        )
    assert facts["client_cert_requested"] is True and facts["client_cert_required"] is True
    assert "alert" in facts["client_cert_alert"]
    x25519 = by_name(facts["groups"])["X25519"]
    assert (x25519["accepted"], x25519["negotiated"]) == (True, "x25519")
    assert x25519["reason"].startswith("then the server required a client certificate")
    assert facts["client_ca_names"] == ["CN=Tollgate Test Client CA"]  # read from the request itself
    p384 = by_name(facts["groups"])["P-384"]  # not among the server's groups: it fell back to RSA kx
    assert (p384["accepted"], p384["reason"]) == (
        False,
        "the server chose a key exchange without a named group",
    )
    ecdsa = by_name(facts["signature_algorithms"])["ecdsa_secp256r1_sha256"]
    assert (ecdsa["accepted"], ecdsa["cert_key_type"]) == (True, "EC")
    assert server.seen["request", True] >= 10


def test_debian_nginx_on_openssl_3_refuses_the_hybrid_and_asks_no_client_certificate():
    try:
        nginx = Nginx(extra_key_types=("ec",))
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with nginx:
        facts = handshake_facts("127.0.0.1", nginx.tls_port, server_name="127.0.0.1", verify=False)
        tls12 = server_accepts(
            "127.0.0.1", nginx.tls_port, server_name="127.0.0.1", protocol="TLSv1.2", budget_s=10
        )
    assert facts["error"] is None and facts["accept_probe"]["error"] is None
    groups = by_name(facts["groups"])
    # nginx's OpenSSL 3.0 has no hybrid: the server's refusal (an alert), listed, not an error.
    for hybrid in ("X25519MLKEM768", "SecP256r1MLKEM768", "SecP384r1MLKEM1024"):
        assert groups[hybrid]["accepted"] is False and "alert" in groups[hybrid]["reason"], hybrid
    assert groups["X25519"]["accepted"] is True and groups["X25519"]["negotiated"] == "x25519"
    assert groups["P-256"]["accepted"] is True and groups["P-384"]["accepted"] is True
    sigalgs = by_name(facts["signature_algorithms"])
    assert sigalgs["ecdsa_secp256r1_sha256"]["cert_key_type"] == "EC"
    assert sigalgs["rsa_pss_rsae_sha256"]["cert_key_type"] == "RSA"
    assert facts["client_cert_requested"] is False and facts["client_ca_names"] is None
    # Under TLS 1.2 the hybrids cannot be offered at all: "could not ask", not the server's refusal.
    groups12 = by_name(tls12["groups"])
    assert groups12["X25519MLKEM768"]["accepted"] is None
    assert (
        groups12["X25519MLKEM768"]["reason"]
        == "not offered: named in TLS 1.3 only (the server spoke TLSv1.2)"
    )
    assert groups12["X25519"]["accepted"] is True and groups12["P-384"]["negotiated"] == "secp384r1"
    assert tls12["accept_probe"]["protocol"] == "TLSv1.2"
    assert by_name(tls12["signature_algorithms"])["rsa_pkcs1_sha256"]["accepted"] is True


def test_the_probe_stops_at_its_budget():
    """A server that accepts the TCP connection and never answers: each try waits its timeout at
    most, and the candidates after the budget are listed as not tried."""
    listener = socket.create_server(("127.0.0.1", 0))
    held = []
    stop = threading.Event()

    def hold() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=hold, daemon=True).start()
    try:
        facts = server_accepts(
            "127.0.0.1",
            listener.getsockname()[1],
            server_name=None,
            protocol="TLSv1.3",
            timeout_s=0.3,
            budget_s=0.8,
        )
    finally:
        stop.set()
        listener.close()
        for sock in held:
            sock.close()
    rows = facts["groups"] + facts["signature_algorithms"]
    assert all(row["accepted"] is None for row in rows)
    assert {row["reason"] for row in rows} == {"timed out", "not tried: the probe's time ran out"}
    assert facts["accept_probe"]["handshakes"] <= 4
