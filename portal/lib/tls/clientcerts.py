"""Client certificates (mutual TLS) as the portal and the engine handle them. Django-free.

A pair is a PEM certificate (the leaf first, then any intermediates) and its unencrypted PEM private
key. ``load_pair`` checks what a user gave (both parse, the key is the certificate's, an RSA or ECDSA
key) and returns its public facts; the portal stores the pair encrypted on the target
(``portal.targets.clientcerts``), one per key type, and never shows it again. A run that needs one
(the ``tls_mtls`` arm, the matrix's ``client_cert`` dimension) gets the target's pairs sealed into
its config, and the engine gets them on its stdin only (``EngineConfig.client_certs``:
``{key type: {"cert", "key"}}``).

Which pair the ``tls_mtls`` arm presents: the first key type of ``KEY_TYPES`` the run holds
(``arm_key_type``), so an RSA certificate when the target holds both (the matrix compares the two).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

KEY_TYPES = ("rsa", "ecdsa")
MTLS_ARM = "tls_mtls"
MAX_PEM_CHARS = 64 * 1024  # a chain of a few certificates, or one key
CERT_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)
# The run option's help (portal.lib.runs.runspec.RunSpec.client_cert): the form, the API and --help.
RUN_OPTION_HELP = (
    'Optional: {"cert": PEM certificate chain (leaf first), "key": unencrypted PEM key}, stored encrypted '
    "on the target (replacing its one of that key type: RSA or ECDSA) and never shown again; the tls_mtls "
    "arm and the matrix's client_cert dimension present the target's. Empty: the ones it holds."
)
NO_CERTIFICATE_HINT = (
    "add one on the target's client certificate page, or give --client-cert FILE --client-key FILE "
    '(API: "client_cert": {"cert", "key"})'
)


class ClientCertError(ValueError):
    """What the user gave is not a client certificate and key Tollgate can use; the message says why
    (never the key)."""


@dataclass(frozen=True)
class ClientCert:
    cert_pem: str  # the chain as given: leaf first
    key_pem: str
    key_type: str  # "rsa" or "ecdsa"
    subject: str
    issuer: str
    not_after: str  # ISO 8601, UTC
    fingerprint_sha256: str  # of the leaf's DER, hex with colons (as openssl x509 -fingerprint)

    def facts(self) -> dict:
        """What may be shown and reported: everything but the PEM texts."""
        return {
            "key_type": self.key_type,
            "subject": self.subject,
            "issuer": self.issuer,
            "not_after": self.not_after,
            "fingerprint_sha256": self.fingerprint_sha256,
        }

    def engine(self) -> dict:
        """The pair as ``EngineConfig.client_certs`` holds it."""
        return {"cert": self.cert_pem, "key": self.key_pem}


def key_type_of(key) -> str | None:
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        return "rsa"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        return "ecdsa"
    return None


def load_pair(cert_pem: str, key_pem: str) -> ClientCert:
    """Check a certificate (chain) and its key; ``ClientCertError`` says what is wrong."""
    cert_pem, key_pem = (cert_pem or "").strip(), (key_pem or "").strip()
    if not cert_pem or not key_pem:
        raise ClientCertError("give both the client certificate and its private key (PEM)")
    if len(cert_pem) > MAX_PEM_CHARS or len(key_pem) > MAX_PEM_CHARS:
        raise ClientCertError(f"a PEM text is longer than {MAX_PEM_CHARS // 1024} KiB")
    blocks = CERT_BLOCK.findall(cert_pem)
    if not blocks:
        raise ClientCertError("the certificate is not PEM (-----BEGIN CERTIFICATE-----)")
    try:
        chain = [x509.load_pem_x509_certificate(block.encode("ascii")) for block in blocks]
    except (ValueError, UnicodeEncodeError):
        raise ClientCertError("the certificate does not parse as an X.509 PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem.encode("utf-8", "replace"), password=None)
    except TypeError:
        raise ClientCertError("the private key is encrypted: give it without a passphrase") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ClientCertError("the private key is not an unencrypted PEM key") from None
    leaf = chain[0]
    kind = key_type_of(key)
    if kind is None:
        raise ClientCertError("the key is neither RSA nor ECDSA (the kinds the matrix compares)")
    if key_type_of(leaf.public_key()) != kind or _public(leaf.public_key()) != _public(key.public_key()):
        raise ClientCertError("the private key does not belong to the certificate (the first one given)")
    fingerprint = hashlib.sha256(leaf.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return ClientCert(
        cert_pem="\n".join(blocks) + "\n",
        key_pem=key_pem + "\n",
        key_type=kind,
        subject=leaf.subject.rfc4514_string(),
        issuer=leaf.issuer.rfc4514_string(),
        not_after=leaf.not_valid_after_utc.isoformat(),
        fingerprint_sha256=":".join(fingerprint[i : i + 2] for i in range(0, len(fingerprint), 2)),
    )


def _public(key) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def needs_client_cert(config: dict) -> bool:
    """Whether a run (its engine config as a dict) presents a client certificate anywhere."""
    arms = [arm.get("name") if isinstance(arm, dict) else arm for arm in config.get("arms") or []]
    return MTLS_ARM in arms or "client_cert" in (config.get("tls_matrix") or [])


def arm_key_type(client_certs: dict | None) -> str | None:
    """The key type of the pair the ``tls_mtls`` arm presents (None: the run holds none)."""
    return next((kind for kind in KEY_TYPES if (client_certs or {}).get(kind)), None)


LABELS = {"rsa": "RSA", "ecdsa": "ECDSA"}


def _named(kind: str, facts: dict | None) -> str:
    facts = facts or {}
    said = f"the {LABELS.get(kind, kind)} client certificate"
    if facts.get("subject"):
        issuer, fingerprint = facts.get("issuer") or "?", facts.get("fingerprint_sha256") or "?"
        said += f" {facts['subject']} (issuer {issuer}, SHA-256 {fingerprint})"
    return said


def method_text(config: dict) -> str:
    """The report's method line on client certificates ("" when the run presents none): what the
    ``tls_mtls`` arm measures and with which certificate, and what the matrix's variants present.
    ``config``: the stored run config (its ``client_certs`` are the public facts)."""
    if not needs_client_cert(config):
        return ""
    held = config.get("client_certs") or {}
    said = []
    arms = [arm.get("name") if isinstance(arm, dict) else arm for arm in config.get("arms") or []]
    if MTLS_ARM in arms:
        kind = arm_key_type(held)
        which = _named(kind, held.get(kind)) if kind else "the target's client certificate"
        said.append(
            f"{MTLS_ARM}: a new connection and a full handshake per request, as tls_new, presenting {which}; "
            "the server requests it (CertificateRequest) and verifies it (the client's Certificate and "
            "CertificateVerify, the chain checked against its CA) on every new connection, which "
            "tls_new beside it does not: client_certificate = tls_mtls − tls_new. Before measuring, one "
            "handshake checked that the server asked for the certificate and accepted it."
        )
    if "client_cert" in (config.get("tls_matrix") or []):
        kinds = ", ".join(_named(kind, held.get(kind)) for kind in KEY_TYPES if kind in held)
        said.append(
            "The matrix's client_cert variants repeat tls_new (and h2_new) presenting no client "
            "certificate, then "
            f"{kinds or 'none the target held'} (a variant whose key type the target lacks, or whose "
            "server did not ask, is refused)."
        )
    return " ".join(said)
