"""A failed TLS handshake in words: what the TLS library said (``[SSL: SSLV3_ALERT_HANDSHAKE_FAILURE]
sslv3 alert handshake failure (_ssl.c:1006)``, pyOpenSSL's ``[('SSL routines', '', 'tls alert
handshake failure')]``) turned into what a reader can act on ("the server refused the handshake: no
common key-exchange group — it does not offer X25519MLKEM768"). Pure functions.

The pages and the status lines show the words; the library's own text stays in the evidence (the
report's ``detail``, the run's error detail). A text this module does not recognise is left as it
is: never a guess dressed as a finding.
"""

from __future__ import annotations

import re

from portal.lib.tls import matrix

# (pattern of the library's text, lower case; the words). Order matters: the first match wins.
PATTERNS: tuple[tuple[str, str], ...] = (
    (r"certificate verify failed:? ?([^()\]]*)", "the server's certificate did not verify{detail}"),
    (r"no.application.protocol", "the server offers none of the protocols asked for over ALPN (no h2)"),
    (r"protocol.version|unsupported.protocol|no.protocols.available", "no TLS version in common"),
    (r"certificate.required", "the server requires a client certificate, and none was sent"),
    (r"alert.(bad.certificate|unknown.ca|certificate.unknown)", "the server rejected the client certificate"),
    (r"no.shared.cipher|no.cipher", "no cipher suite in common"),
    (r"no.(suitable|shared).signature|signature.algorithms", "no signature algorithm in common"),
    (r"no.suitable.(key.share|group)|no.shared.groups?", "no key-exchange group in common"),
    (r"wrong.version.number|packet.length.too.long|http.request", "the server did not answer with TLS"),
    (r"unexpected.eof|eof.occurred|connection.reset|unexpected.message", "the server closed the connection"),
)
HANDSHAKE_FAILURE = re.compile(r"(handshake.failure|insufficient.security|illegal.parameter)")
# What tells the text came from a TLS library (words of ours are never reworded).
LIBRARY = re.compile(r"\[ssl[:\]]|\[pyopenssl\]|ssl routines|sslerror|_ssl\.c|alert ", re.IGNORECASE)
ALERT = re.compile(r"alert", re.IGNORECASE)
CERTS = {"rsa": "RSA", "ecdsa": "ECDSA", "ed25519": "Ed25519"}
GROUPS = {"x25519": "X25519", "p256": "P-256", "x25519mlkem768": "X25519MLKEM768"}


def words(raw: str | None, variant: dict | None = None, refused_groups: set[str] | None = None) -> str | None:
    """The library's ``raw`` text of a failed handshake in words, or None when it is not a TLS
    library's text or says nothing this module knows. ``variant``: what the handshake asked for (a
    matrix variant: protocol, group, cert), to name what the server lacks after a bare handshake
    failure; ``refused_groups``: the groups the TLS facts found the server refuses (lower case)."""
    text = (raw or "").lower()
    if not text or not LIBRARY.search(raw or ""):
        return None
    who = "the server refused the handshake" if ALERT.search(text) else "the handshake failed"
    for pattern, said in PATTERNS:
        found = re.search(pattern, text)
        if found:
            detail = found.group(1).strip() if found.groups() else ""
            said = said.format(detail=f": {detail}" if detail else "")
            if said == "no TLS version in common" and (variant or {}).get("protocol"):
                said += f" — it does not speak {matrix.LABELS[variant['protocol']]}"
            return said if said.startswith("the server") else f"{who}: {said}"
    if HANDSHAKE_FAILURE.search(text):
        return f"{who}: {_lacks(variant or {}, refused_groups or set())}"
    return None


def _lacks(variant: dict, refused_groups: set[str]) -> str:
    """What a bare handshake failure most likely means for what was asked: the one group offered,
    or the one certificate type asked for."""
    group, cert = variant.get("group"), variant.get("cert")
    name = GROUPS.get(group, group) if group else None
    if group and (not cert or matrix.canonical_group(group) in refused_groups):
        return f"no common key-exchange group — it does not offer {name}"
    if cert and not group:
        return f"no common signature algorithm — it holds no {CERTS.get(cert, cert)} certificate"
    if group and cert:
        return f"no common parameters — it does not offer {name} with an {CERTS.get(cert, cert)} certificate"
    return "no parameters in common (a handshake failure alert)"


# The library's own text inside a longer message: Python's ``[SSL: CODE] reason (_ssl.c:N)``, or
# pyOpenSSL's ``[('SSL routines', '', 'reason')]``, with the exception's name and errno before it.
SPAN = re.compile(
    r"(?:tls_error: )?(?:\w+Error: )?(?:\[Errno \d+\] )?(?:\[pyOpenSSL\] )?"
    r"(?:\[\('[^\]]*'\)\]|\[SSL(?:: [A-Z0-9_]+)?\][^()]*(?:\(_ssl\.c:\d+\))?)"
)


def library_text(text: str | None) -> str | None:
    """The TLS library's own part of ``text`` when ``reword`` puts it in words (the evidence kept
    beside the words), else None."""
    span = SPAN.search(text or "")
    if span is None or words(span.group(0)) is None:
        return None
    return span.group(0).removeprefix("tls_error: ")


def reword(text: str | None, variant: dict | None = None, refused_groups: set[str] | None = None) -> str:
    """``text`` (a refusal, a run's reason) with the library's part in words (``words``) and the rest
    as it was: "TLS handshake failed (tls_error: [SSL: …] sslv3 alert handshake failure (_ssl.c:1006))"
    → "TLS handshake failed (the server refused the handshake: no parameters in common …)"; a text
    without a library's part comes back unchanged."""
    text = text or ""
    span = SPAN.search(text)
    said = words(span.group(0), variant, refused_groups) if span else None
    if said is None:
        return text
    before = text[: span.start()]
    for lead in ("the server refused the handshake: ", "the handshake failed: "):
        if before.endswith(lead) and said.startswith(lead.split(":")[0]):
            before = before[: -len(lead)]  # said once
    return before + said + text[span.end() :]
