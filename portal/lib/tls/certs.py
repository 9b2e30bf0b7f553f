"""Self-signed certificates for the demo target and the tests (never committed, always generated)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_self_signed(
    directory: Path,
    *,
    name: str = "server",
    common_name: str = "localhost",
    key_type: str = "rsa",
    key_bits: int = 2048,
    sans: Iterable[str] = ("localhost", "127.0.0.1", "::1"),
) -> tuple[Path, Path]:
    """Write ``<name>.crt`` and ``<name>.key`` (0600) into ``directory``; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    if key_type == "rsa":
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
    elif key_type == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        raise ValueError(f"key_type must be 'rsa' or 'ec', not {key_type!r}")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([_san(s) for s in sans]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path


def _key(key_type: str, key_bits: int = 2048):
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=key_bits)
    if key_type in ("ec", "ecdsa"):
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key_type must be 'rsa' or 'ec', not {key_type!r}")


def _pem_key(key) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def make_ca(common_name: str = "Tollgate test CA", key_type: str = "ec") -> tuple[str, str]:
    """A certificate authority for client certificates (tests, the mTLS demo): (certificate PEM,
    key PEM), in memory."""
    key = _key(key_type)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii"), _pem_key(key)


def _signed_by(ca: tuple[str, str], common_name: str, key_type: str, key_bits: int, usage, extensions=()):
    """(certificate, key) for ``common_name``, signed by ``ca`` (``make_ca``'s pair), for ``usage``
    (an ``ExtendedKeyUsageOID``), valid from yesterday for 30 days, ``extensions`` added (non-critical)."""
    ca_cert = x509.load_pem_x509_certificate(ca[0].encode("ascii"))
    ca_key = serialization.load_pem_private_key(ca[1].encode("ascii"), password=None)
    key = _key(key_type, key_bits)
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_client_cert(
    ca: tuple[str, str], common_name: str = "tollgate-client", key_type: str = "rsa", key_bits: int = 2048
) -> tuple[str, str]:
    """A client certificate (extended key usage clientAuth) signed by ``ca`` (``make_ca``'s pair):
    (certificate PEM, key PEM), in memory."""
    usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH
    cert, key = _signed_by(ca, common_name, key_type, key_bits, usage)
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii"), _pem_key(key)


def make_server_cert(
    ca: tuple[str, str],
    directory: Path,
    *,
    name: str = "server",
    common_name: str = "localhost",
    key_type: str = "rsa",
    key_bits: int = 2048,
    sans: Iterable[str] = ("localhost", "127.0.0.1", "::1"),
) -> tuple[Path, Path]:
    """A server certificate (extended key usage serverAuth) signed by ``ca`` (``make_ca``'s pair), as
    ``make_self_signed`` writes its files: a chain as a public server presents one, verified with the
    CA's certificate (``bench.caddy.Caddy(server_ca=...)``)."""
    directory.mkdir(parents=True, exist_ok=True)
    usage, san = (
        x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
        x509.SubjectAlternativeName([_san(s) for s in sans]),
    )
    cert, key = _signed_by(ca, common_name, key_type, key_bits, usage, (san,))
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(_pem_key(key))
    return cert_path, key_path
