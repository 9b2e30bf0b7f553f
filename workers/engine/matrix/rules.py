"""What a TLS matrix variant must be, on either TLS library: the refusal, the names of groups and
certificate types, and the check of a probing handshake against the variant
(``workers.engine.matrix.variants``)."""

from __future__ import annotations

import dataclasses

from portal.lib.tls import clientcerts, matrix
from workers.engine.http.endpoint import ARM_POLICIES, ConnectionPolicy
from workers.engine.tls import mtls
from workers.engine.tls.libraries import BUNDLED, SYSTEM, load_client_cert

OPENSSL_GROUPS = {"x25519": "X25519", "p256": "prime256v1", "x25519mlkem768": "X25519MLKEM768"}
WAY_OUT = "needs the bundled TLS library (tls_library bundled, CLI --tls-library bundled)"
NEGOTIATED_PROTOCOL = {"tls1.2": "TLSv1.2", "tls1.3": "TLSv1.3"}
CERT_KEY_TYPES = {"rsa": "RSA", "ecdsa": "EC", "ed25519": "Ed25519"}


class Refused(Exception):
    """The variant cannot be measured: the generator or the server refused it, or it negotiated
    something else than it asked for."""


def openssl_group(group: str) -> str:
    """The name a library is given for a group value: OpenSSL's for the built-in ones, the user's
    own name for a group of ``tls_groups``."""
    return OPENSSL_GROUPS.get(group, group)


def add_client_cert(context, variant: dict, client_certs: dict | None) -> None:
    """The ``client_cert`` variant's certificate on ``context`` (either TLS library); refused when the
    run holds none of that key type."""
    kind = variant.get("client_cert")
    if kind in (None, "none"):
        return
    pair = (client_certs or {}).get(kind)
    if not pair:
        raise Refused(
            f"the target holds no {kind.upper()} client certificate: {clientcerts.NO_CERTIFICATE_HINT}"
        )
    load_client_cert(context, pair)


def check_client_cert(variant: dict, messages: list, arm: str = matrix.MATRIX_ARM) -> bool | None:
    """Whether the server asked for a client certificate (a CertificateRequest among the handshake's
    ``messages``, ``HandshakeLog.messages``); a variant presenting one (a sub-arm of ``arm``) is
    refused when it did not ask, or when none was sent."""
    log = mtls.Messages()
    log.seen = messages
    if variant.get("client_cert") in (None, "none"):
        return log.asked() if variant.get("client_cert") else None
    if not log.asked():
        raise Refused(mtls.NOT_ASKED.format(arm=matrix.variant_name(variant, arm)))
    if not log.sent():
        raise Refused("the server asked for a client certificate but the generator sent none")
    return True


def policy(variant: dict, arm: str = matrix.MATRIX_ARM) -> ConnectionPolicy:
    """The sub-arm's connection policy: its arm's (keep-alive for ``tls`` and ``h2``, HTTP/2 for ``h2``
    and ``h2_new``), resuming as the variant says."""
    resume = variant.get("resumption") in ("ticket", "session_id")
    return dataclasses.replace(ARM_POLICIES[arm][1], resume_sessions=resume)


def handshake_refused(exc: BaseException, variant: dict, arm: str = matrix.MATRIX_ARM) -> Refused:
    """A probe's failed handshake (either library) as the variant's refusal: the server's (an alert),
    saying so for an HTTP/2 variant whose server ends it for want of h2 (``no_application_protocol``),
    or the handshake's failure on the way."""
    text = str(exc)
    if ARM_POLICIES[arm][1].http2 and "NO_APPLICATION_PROTOCOL" in text.upper().replace(" ", "_"):
        return Refused(
            f"the server does not offer HTTP/2 over ALPN with this variant (its handshake alert: "
            f"{type(exc).__name__}: {text}; h2 offered alone)"
        )
    who = "the server refused the handshake" if "alert" in text.lower() else "the handshake failed"
    return Refused(f"{who}: {type(exc).__name__}: {text}{hint(variant)}")


def check_alpn(arm: str, selected: str | None) -> None:
    """An HTTP/2 arm's variant (its context offers h2 alone) must have negotiated h2 over ALPN: else it
    is refused with what the server selected, never measured as HTTP/1.1."""
    if ARM_POLICIES[arm][1].http2 and selected != "h2":
        said = f"it selected {selected}" if selected else "it selected no protocol"
        raise Refused(
            f"the server does not offer HTTP/2 over ALPN with this variant ({said}; h2 offered alone)"
        )


def chosen_by(variant: dict, protocol: str | None, library: str) -> str | None:
    """How the certificate type was chosen: by the client's signature algorithms (bundled), by its
    TLS 1.2 cipher suites (system), or by the server alone (system, TLS 1.3)."""
    if not variant.get("cert"):
        return None
    if library == BUNDLED:
        return "signature algorithms"
    return "cipher suites" if protocol == "TLSv1.2" else "the server"


def hint(variant: dict) -> str:
    if (
        variant.get("cert") == "ecdsa"
        and variant.get("protocol") != "tls1.3"
        and variant.get("group") not in (None, "p256")
    ):
        return (
            " (in TLS 1.2 the client's supported groups also name the curves it accepts for an ECDSA "
            "certificate, and the variant offers one group only: a P-256 certificate needs the p256 group)"
        )
    return ""


def said(negotiated: dict) -> str:
    return (
        f"negotiated {negotiated['protocol']}, group {negotiated['group'] or 'unknown'}, "
        f"{negotiated['cert_key_type']} certificate"
    )


def check(variant: dict, negotiated: dict, library: str = SYSTEM) -> None:
    """The handshake must be the variant: else it is refused, with what was negotiated instead."""
    wrong = []
    protocol, group, cert = variant.get("protocol"), variant.get("group"), variant.get("cert")
    if protocol and negotiated["protocol"] != NEGOTIATED_PROTOCOL[protocol]:
        wrong.append(f"protocol {protocol}")
    if group and not matrix.same_group(group, negotiated["group"]):
        wrong.append(f"group {openssl_group(group)}")
    if cert and negotiated["cert_key_type"] != CERT_KEY_TYPES[cert]:
        if library == SYSTEM and negotiated["protocol"] == "TLSv1.3":
            # Not the server's refusal: this library cannot ask for a certificate type in TLS 1.3.
            raise Refused(
                f"the system TLS library (Python's ssl) cannot choose the certificate under TLS 1.3 "
                f"(no signature-algorithm setter): the server chose {negotiated['cert_key_type']}; {WAY_OUT}"
            )
        wrong.append(f"a {CERT_KEY_TYPES[cert]} certificate")
    if variant.get("resumption") == "session_id" and negotiated["protocol"] == "TLSv1.3":
        wrong.append("session-ID resumption (TLS 1.3 resumes by ticket only)")
    if wrong:
        raise Refused(f"asked for {', '.join(wrong)}; {said(negotiated)}")


def resumed_or_refused(variant: dict, negotiated: dict, resumes) -> None:
    """With a resumption variant, offer the session again (``resumes()``: whether the server took it)
    and record it; a server that does not resume refuses the variant, on either library."""
    if policy(variant).resume_sessions:
        negotiated["session_resumed"] = resumes()
        if not negotiated["session_resumed"]:
            raise Refused(
                f"the server did not resume the session ({variant['resumption']}): {said(negotiated)}"
            )
