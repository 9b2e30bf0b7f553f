"""SSH keys as the portal handles them, without an SSH library: generate a key pair, read a pasted
private key, its public line, OpenSSH fingerprints and ``known_hosts`` entries.

Django-free and paramiko-free, so the web process can check what a user typed; connecting over SSH is
the worker's job (``workers.probes.ssh``), which pins host keys with these same parsers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

PUBLIC_COMMENT = "tollgate"
KEY_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa")


class KeyFormatError(ValueError):
    """What the user gave is not a key Tollgate can use; the message says which."""


@dataclass(frozen=True)
class PublicKey:
    """An SSH public key: its type name and wire-format blob (what ``known_hosts`` stores in base64)."""

    key_type: str
    blob: bytes

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.blob)

    @property
    def base64(self) -> str:
        return base64.b64encode(self.blob).decode("ascii")


def fingerprint(blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint (``ssh-keygen -lf``): base64 of the key blob's SHA-256, no padding."""
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


def generate_key() -> tuple[str, str]:
    """A new Ed25519 key pair: (OpenSSH private key PEM, public key line)."""
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode("ascii")
    return pem, public_line(pem)


def load_private_key(pem: str):
    """An unencrypted OpenSSH or PEM Ed25519, ECDSA or RSA private key; KeyFormatError otherwise."""
    data = pem.strip().encode("utf-8", "replace") + b"\n"
    loaders = (
        lambda: serialization.load_ssh_private_key(data, password=None),
        lambda: serialization.load_pem_private_key(data, password=None),
    )
    for load in loaders:
        try:
            key = load()
        except Exception:  # noqa: BLE001, S112 - cryptography raises several types for odd input
            continue
        if isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            return key
    raise KeyFormatError("the private key is not an unencrypted OpenSSH/PEM Ed25519, ECDSA or RSA key")


def public_key_from_pem(pem: str) -> PublicKey:
    public = load_private_key(pem).public_key()
    line = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    key_type, encoded = line.decode("ascii").split()[:2]
    return PublicKey(key_type, base64.b64decode(encoded))


def public_line(pem: str) -> str:
    """The ``authorized_keys`` line of a private key: what the user copies to the server."""
    key = public_key_from_pem(pem)
    return f"{key.key_type} {key.base64} {PUBLIC_COMMENT}"


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _blob_type(blob: bytes) -> str | None:
    if len(blob) < 4:
        return None
    (length,) = struct.unpack(">I", blob[:4])
    name = blob[4 : 4 + length]
    return name.decode("ascii", "replace") if len(name) == length else None


def _matches(pattern: str, name: str) -> bool:
    """A plain host name, or OpenSSH's hashed form ``|1|salt|hmac-sha1(salt, name)``."""
    if pattern.startswith("|1|"):
        try:
            _, _, salt, digest = pattern.split("|")
            expected = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(expected, base64.b64decode(digest))
        except (ValueError, binascii.Error):
            return False
    return pattern == name


def key_from_known_hosts(text: str, host: str, port: int) -> PublicKey | None:
    """The pinned key for host:port from OpenSSH ``known_hosts`` text (plain or hashed entries).
    Malformed lines, markers (``@revoked``, ``@cert-authority``) and unknown key types pin nothing."""
    name = known_hosts_name(host, port)
    for raw in text.splitlines():
        fields = raw.strip().split()
        if len(fields) < 3 or fields[0].startswith(("#", "@")):
            continue
        patterns, key_type, encoded = fields[0], fields[1], fields[2]
        if key_type not in KEY_TYPES or not any(_matches(p, name) for p in patterns.split(",")):
            continue
        try:
            blob = base64.b64decode(encoded, validate=True)
        except (ValueError, binascii.Error):
            continue
        if _blob_type(blob) == key_type:
            return PublicKey(key_type, blob)
    return None


def known_hosts_line(host: str, port: int, key: PublicKey) -> str:
    return f"{known_hosts_name(host, port)} {key.key_type} {key.base64}"
