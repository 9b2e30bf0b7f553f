"""The TLS configuration matrix against a real nginx, through the whole pipeline (issue 14).

nginx holds an RSA (4096-bit: its signature is what makes the RSA handshake dearer) and an ECDSA
P-256 certificate and speaks TLS 1.2 and 1.3. Every variant is verified twice: from the handshake by
the engine's probe (``negotiated``) and from the server's side, by nginx's access log
(``$ssl_protocol $ssl_cipher $ssl_curve $ssl_session_reused`` per request).
"""

from __future__ import annotations

import io
import json
import ssl
from collections import Counter

import pytest
from django.core.management import call_command

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import ArmResult, Run
from tests.engine_config import engine_config
from workers import runner

pytestmark = pytest.mark.django_db(transaction=True)
LOG_FORMAT = "$ssl_protocol $ssl_cipher $ssl_curve $ssl_session_reused"
MAJOR, MINOR = ssl.OPENSSL_VERSION_INFO[:2]
LACKS_MLKEM = f"the generator's OpenSSL {MAJOR}.{MINOR}.x lacks X25519MLKEM768"


def nginx_or_skip(**kwargs):
    from bench.nginx import Nginx

    try:
        return Nginx(access_log_format=LOG_FORMAT, **kwargs).start()
    except RuntimeError as exc:
        pytest.skip(str(exc))


def run_matrix(owner, nginx, dimensions: list[str]) -> Run:
    target = services.get_or_create_target(
        personal_project(owner), "nginx", nginx.plain_url(), nginx.tls_url()
    )
    config = engine_config(
        {"plain_new": nginx.plain_url("/1k"), "tls_new": nginx.tls_url("/1k")},
        tls_matrix=dimensions,
        arrival_rate=60,
    )
    return runner.execute_run(services.create_run(owner, target, config).pk)


# serial: it compares the handshake latency of ECDSA and RSA, so it runs alone (Makefile).
@pytest.mark.serial
def test_matrix_measures_the_variants_nginx_accepts_and_ranks_ecdsa_over_rsa(owner):
    nginx = nginx_or_skip(key_bits=4096, extra_key_types=("ec",))
    try:
        run = run_matrix(owner, nginx, ["protocol", "group", "cert", "resumption"])
        seen = Counter(tuple(line.split()) for line in nginx.access_log_lines())
    finally:
        nginx.stop()
    assert run.status == Run.Status.SUCCEEDED, run.error
    report = reporting.run_report(run)
    matrix = {m["arm"]: m for m in report["matrix"]}
    assert len(matrix) == 54  # 2 protocols × 3 groups × 3 certificates × 3 resumptions
    measured = {name for name, m in matrix.items() if m["status"] == "measured"}
    # Only measured variants ran: one ArmResult each, no error storm anywhere.
    stored = set(ArmResult.objects.filter(run=run).values_list("arm", flat=True))
    assert stored == {"plain_new", "tls_new"} | measured
    assert all(m["requests"] > 0 for name, m in matrix.items() if name in measured)
    assert sum(report["arms"][name]["failures"] for name in stored) == 0

    # Negotiated parameters, read from each variant's handshake.
    for name in measured:
        want, got = matrix[name]["variant"], matrix[name]["negotiated"]
        assert got["protocol"] == {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}[want["protocol"]], name
        assert got["group"] == {"x25519": "x25519", "p256": "secp256r1"}[want["group"]], name
        assert got["cert_key_type"] == {"rsa": "RSA", "ecdsa": "EC"}[want["cert_key_type"]], name
        assert got["session_resumed"] is (want["resumption"] != "none" or None), name
    rsa = matrix["tls_new@1.2+p256+rsa+full"]
    ecdsa = matrix["tls_new@1.2+p256+ecdsa+full"]
    assert rsa["negotiated"]["cert_key_bits"] == 4096 and ecdsa["negotiated"]["cert_key_bits"] == 256
    assert rsa["negotiated"]["chain_bytes"] > ecdsa["negotiated"]["chain_bytes"]
    # ECDSA's handshake is cheaper than RSA-4096's, and the advice says so from these two sub-arms.
    assert ecdsa["tls_handshake_us"]["p50"] < rsa["tls_handshake_us"]["p50"]
    cert = next(a for a in report["advice"] if a.get("dimension") == "cert")
    assert cert["title"].startswith("ECDSA certificate instead of RSA") and cert["saving_us"] > 0
    assert "+rsa+" in cert["arms"][0] and "+ecdsa+" in cert["arms"][1]
    saving = [a["saving_us"] for a in report["advice"]]
    assert saving == sorted(saving, reverse=True)
    assert any(a.get("dimension") == "resumption" for a in report["advice"])

    # Refused, with the reason: the PQ hybrid and any certificate choice in TLS 1.3 by this library
    # (Python's ssl has no signature-algorithm setter), with the way out; Ed25519 (nginx holds none,
    # and Python cannot ask for it); an ECDSA P-256 certificate with only X25519 offered in TLS 1.2.
    mlkem = [m for m in matrix.values() if m["variant"]["group"] == "x25519mlkem768"]
    if not any(m["status"] == "measured" for m in mlkem):
        assert all(m["status"] == "refused" and LACKS_MLKEM in m["detail"] for m in mlkem)
    tls13 = [m for m in matrix.values() if m["variant"]["protocol"] == "tls1.3"]
    assert all(m["status"] == "refused" and "needs the bundled TLS library" in m["detail"] for m in tls13)
    assert "signature-algorithm setter" in matrix["tls_new@1.3+x25519+rsa+full"]["detail"]
    assert matrix["tls_new@1.2+p256+ed25519+full"]["status"] == "refused"
    assert matrix["tls_new@1.2+x25519+ecdsa+full"]["status"] == "refused"

    # What nginx saw: the ECDSA suite with P-256 on full TLS 1.2 handshakes, RSA suites with X25519,
    # and resumed sessions ("r").
    def count(protocol: str, cipher_part: str, curve: str, reused: str) -> int:
        return sum(
            n
            for (p, c, *rest), n in seen.items()
            if p == protocol
            and cipher_part in c
            and (rest[0] if len(rest) == 2 else "") == curve
            and rest[-1] == reused
        )

    assert count("TLSv1.2", "ECDSA", "prime256v1", ".") >= ecdsa["requests"]
    assert count("TLSv1.2", "RSA", "prime256v1", ".") >= rsa["requests"]
    assert count("TLSv1.2", "RSA", "X25519", ".") >= matrix["tls_new@1.2+x25519+rsa+full"]["requests"]
    assert (
        sum(n for key, n in seen.items() if key[-1] == "r")
        >= matrix["tls_new@1.2+p256+rsa+ticket"]["requests"]
    )

    # Each measured variant has a WAN projection of its own, from its own handshake flight.
    rows = [r for r in report["wan"] if r["arm"] == "tls_new@1.2+p256+rsa+full"]
    assert [r["rtt_ms"] for r in rows] == [2.0, 20.0, 80.0, 200.0]
    assert rows[0]["round_trips"] == 4 and rows[0]["variant"]["cert_key_type"] == "rsa"
    assert rows[0]["model"]["handshake_flight_source"].startswith("measured")


def test_a_server_refusing_tls12_and_lacking_groups_gets_refused_variants_not_errors(owner):
    # TLS 1.3 only, and P-256 only: TLS 1.2 and X25519 are refused by the server itself.
    nginx = nginx_or_skip(tls_protocols="TLSv1.3", ssl_conf_command="Groups prime256v1")
    try:
        out, err = io.StringIO(), io.StringIO()
        call_command(
            "tollgate",
            "run",
            "--owner",
            "owner",
            "--plain-url",
            nginx.plain_url(),
            "--tls-url",
            nginx.tls_url(),
            "--arms",
            "plain,tls,plain_new,tls_new",
            "--users",
            "1",
            "--spawn-rate",
            "10",
            "--warmup",
            "0.2",
            "--duration",
            "1",
            "--insecure",
            "--json",
            "--tls-matrix",
            "protocol,group",
            "--wan-rtt",
            "5,50",
            stdout=out,
            stderr=err,
        )
    finally:
        nginx.stop()
    report = json.loads(out.getvalue())
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED and run.config["tls_matrix"] == ["protocol", "group"]
    matrix = {m["arm"]: m for m in report["matrix"]}
    assert len(matrix) == 2 + 6  # tls for the protocol only, tls_new for protocol × group
    # Keep-alive tls repeated per protocol: TLS 1.2 refused, TLS 1.3 measured on warm connections.
    assert matrix["tls@1.2"]["status"] == "refused" and "server refused" in matrix["tls@1.2"]["detail"]
    assert matrix["tls@1.3"]["status"] == "measured" and matrix["tls@1.3"]["variant"]["group"] is None
    assert report["arms"]["tls@1.3"]["connections_opened"] == 0  # its one handshake was in the warm-up
    assert matrix["tls@1.3"]["cost"]["base"] == "plain"
    for group in ("x25519", "p256", "mlkem"):
        entry = matrix[f"tls_new@1.2+{group}"]
        assert entry["status"] == "refused" and entry["requests"] is None
    assert "server refused" in matrix["tls_new@1.2+p256"]["detail"]
    assert "server refused" in matrix["tls_new@1.3+x25519"]["detail"]
    assert matrix["tls_new@1.3+p256"]["status"] == "measured"
    assert matrix["tls_new@1.3+p256"]["negotiated"]["group"] == "secp256r1"  # as OpenSSL prints it
    assert matrix["tls_new@1.3+mlkem"]["status"] == "refused"
    # No refused variant was measured: only three arms' rows exist, none with an error.
    assert sorted(ArmResult.objects.filter(run=run).values_list("arm", flat=True)) == [
        "plain",
        "plain_new",
        "tls",
        "tls@1.3",
        "tls_new",
        "tls_new@1.3+p256",
    ]
    assert all(not arm["errors"] for arm in report["arms"].values())
    assert sorted({r["rtt_ms"] for r in report["wan"]}) == [5.0, 50.0]
