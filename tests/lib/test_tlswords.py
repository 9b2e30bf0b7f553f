"""A failed TLS handshake in words (portal.lib.tls.tlswords), the library's own text kept as evidence;
and a run's reason said once (portal.lib.report.evidence: the status line in words, the rest apart)."""

from __future__ import annotations

import pytest

from portal.lib.report import evidence
from portal.lib.tls import tlswords

SYSTEM = "SSLError: [SSL: SSLV3_ALERT_HANDSHAKE_FAILURE] sslv3 alert handshake failure (_ssl.c:1006)"
BUNDLED = "SSLError: [Errno 1] [pyOpenSSL] [('SSL routines', '', 'tls alert handshake failure')]"


@pytest.mark.parametrize("raw", [SYSTEM, BUNDLED])
def test_a_hybrid_the_server_lacks_reads_as_no_common_group(raw):
    text = f"the server refused the handshake: {raw}"
    said = tlswords.reword(text, {"group": "x25519mlkem768", "protocol": "tls1.3"})
    assert said == (
        "the server refused the handshake: no common key-exchange group — it does not offer X25519MLKEM768"
    )
    assert "[" not in said and "SSL routines" not in said
    assert tlswords.library_text(text) == raw


@pytest.mark.parametrize(
    ("raw", "variant", "words"),
    [
        (BUNDLED, {"cert": "ed25519"}, "no common signature algorithm — it holds no Ed25519 certificate"),
        (
            SYSTEM,
            {"group": "p256", "cert": "ecdsa"},
            "no common parameters — it does not offer P-256 with an ECDSA certificate",
        ),
        (SYSTEM, {}, "no parameters in common (a handshake failure alert)"),
        (
            "SSLError: [SSL: TLSV1_ALERT_PROTOCOL_VERSION] tlsv1 alert protocol version (_ssl.c:1006)",
            {"protocol": "tls1.2"},
            "no TLS version in common — it does not speak TLS 1.2",
        ),
        (
            "[SSL: TLSV1_ALERT_NO_APPLICATION_PROTOCOL] tlsv1 alert no application protocol (_ssl.c:1006)",
            {},
            "the server offers none of the protocols asked for over ALPN (no h2)",
        ),
    ],
)
def test_alerts_in_words(raw, variant, words):
    said = tlswords.words(raw, variant)
    assert said.endswith(words), said


def test_a_group_the_tls_facts_found_refused_is_named_even_with_a_certificate_asked():
    said = tlswords.words(SYSTEM, {"group": "x25519mlkem768", "cert": "rsa"}, {"x25519mlkem768"})
    assert said.endswith("it does not offer X25519MLKEM768")


def test_words_of_our_own_are_left_alone():
    for text in ("plain refused: port 8443 speaks TLS", "no arm measured the page: 404 × 1,200 on every arm"):
        assert tlswords.reword(text) == text and tlswords.library_text(text) is None


def test_a_failed_runs_reason_is_said_once_in_words_with_the_library_text_apart():
    error = (
        "Arm tls: preflight of https://127.0.0.1:8081/1k failed: TLS handshake failed (tls_error: SSLError: "
        "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)). Nothing was measured: every "
        "arm's URL is checked before the first arm is measured.\nengine: exited 1"
    )
    reason = evidence.failure_reason("failed", error)
    assert reason == (
        "arm tls: preflight of https://127.0.0.1:8081/1k failed: TLS handshake failed (the server did not "
        "answer with TLS). Nothing was measured: every arm's URL is checked before the first arm is measured"
    )
    assert (
        evidence.error_detail("failed", error) == "engine: exited 1"
    )  # the rest, never the first line again
    assert evidence.library_said("failed", error) == (
        "SSLError: [SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"
    )
    # A cancelled run has no reason in its status line: its whole error is the detail.
    assert evidence.error_detail("cancelled", "Cancelled by the user.") == "Cancelled by the user."
    incomplete = "No cost could be computed — plain arm refused: port 8443 speaks TLS"
    assert evidence.status_text("incomplete", incomplete, None) == (
        "incomplete: no cost could be computed — plain arm refused: port 8443 speaks TLS"
    )
    assert evidence.error_detail("incomplete", incomplete) == ""
