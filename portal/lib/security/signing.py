"""Signed reports: the canonical form of a report, its Ed25519 signature and the check an auditor runs.

Django-free and self-contained (the standard library and ``cryptography`` only), so an auditor who
never installs the portal can verify a downloaded report with this one file (every portal serves it
at ``/.well-known/tollgate-verify-report.py``, and its shared pages link it)::

    python tollgate-verify-report.py tollgate-run-….json --keys tollgate-report-keys.json
    python -m portal.lib.security.signing tollgate-run-….json --keys https://tollgate.example/.well-known/tollgate-report-keys.json

It exits 0 when the report is intact and 1 naming what fails.

What is hashed: the report as downloaded without its ``integrity`` key, in canonical JSON (keys
sorted, no whitespace, UTF-8, no NaN); its SHA-256 is ``integrity.sha256``, so a changed number is
named as a changed digest. What is signed: the canonical JSON of the integrity block without its
``signature`` — ``{"algorithm", "key_id", "sha256", "signed_at"}`` — so the digest (and through it
every number of the report), the key and the signing time are all covered: none of them can be
changed without breaking the signature.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = "Ed25519"
INTEGRITY = "integrity"
FIELDS = ("sha256", "signature", "key_id", "signed_at", "algorithm")
KEYS_TIMEOUT_S = 10.0
# A keys document is a few hundred bytes per key; refuse anything absurd before parsing it.
KEYS_MAX_BYTES = 1 << 20
SHOWN_MAX_CHARS = 100


class KeysError(Exception):
    """The published keys could not be read (a file, a URL, or their content)."""


def canonical(report: Mapping) -> bytes:
    """The bytes that are hashed and signed: the report without its ``integrity`` key, keys sorted,
    no whitespace, UTF-8 (not ``\\u`` escapes). NaN and infinities are refused (not JSON)."""
    return dumps({key: value for key, value in report.items() if key != INTEGRITY}).encode("utf-8")


def dumps(document: object) -> str:
    """Canonical JSON text: keys sorted, no whitespace, no ``\\u`` escapes, no NaN."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(report: Mapping) -> str:
    return hashlib.sha256(canonical(report)).hexdigest()


def public_raw(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes_raw()


def key_id(public_key: Ed25519PublicKey) -> str:
    """A short, stable name of a public key: the first 16 hex digits of the SHA-256 of its raw bytes."""
    return hashlib.sha256(public_raw(public_key)).hexdigest()[:16]


def public_b64(public_key: Ed25519PublicKey) -> str:
    return base64.b64encode(public_raw(public_key)).decode("ascii")


def public_from_b64(text: str) -> Ed25519PublicKey:
    """The public key from its base64 raw 32 bytes; ValueError when it is not one."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError):
        raise ValueError("not base64") from None
    if len(raw) != 32:
        raise ValueError(f"{len(raw)} bytes, an Ed25519 public key has 32")
    return Ed25519PublicKey.from_public_bytes(raw)


def generate() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def signed_message(integrity: Mapping) -> bytes:
    """The bytes the signature covers: the integrity block without ``signature``, canonical JSON."""
    return dumps({field: integrity[field] for field in FIELDS if field != "signature"}).encode("utf-8")


def sign(report: Mapping, private_key: Ed25519PrivateKey, key_id: str, signed_at: str) -> dict:
    """The ``integrity`` block of ``report`` (any ``integrity`` already in it is ignored)."""
    integrity = {
        "sha256": hashlib.sha256(canonical(report)).hexdigest(),
        "key_id": key_id,
        "signed_at": signed_at,
        "algorithm": ALGORITHM,
    }
    signature = private_key.sign(signed_message(integrity))
    return {**integrity, "signature": base64.b64encode(signature).decode("ascii")}


def verify(report: Mapping, keys: Mapping[str, Ed25519PublicKey]) -> list[str]:
    """What is wrong with a signed report, in words; an empty list when it is intact. ``keys`` maps
    key ids to the published public keys."""
    integrity = report.get(INTEGRITY) if isinstance(report, Mapping) else None
    if not isinstance(integrity, Mapping):
        return ["the report carries no integrity block: it is not signed"]
    missing = [field for field in FIELDS if not isinstance(integrity.get(field), str)]
    if missing:
        return [f"the integrity block lacks {', '.join(missing)}"]
    unsigned = sorted(shown(str(field)) for field in integrity if field not in FIELDS)
    if unsigned:  # nothing covers them; docs/auditors.md's recipe would sign them and fail
        return [f"the integrity block carries fields no signature covers: {', '.join(unsigned)}"]
    if integrity["algorithm"] != ALGORITHM:
        return [f"unsupported signature algorithm {integrity['algorithm']!r} (only {ALGORITHM})"]
    try:
        data = canonical(report)
    except (TypeError, ValueError, RecursionError) as exc:
        return [f"the report cannot be put in canonical form: {exc}"]
    problems = []
    actual = hashlib.sha256(data).hexdigest()
    if actual != integrity["sha256"]:
        signed_digest = shown(integrity["sha256"])
        problems.append(
            f"the report's content changed: sha256 {actual} ≠ {signed_digest} (the signed digest)"
        )
    kid = shown(integrity["key_id"])
    public = keys.get(integrity["key_id"])
    if public is None:
        known = ", ".join(sorted(keys)) or "none"
        problems.append(f"unknown key id {kid} (published keys: {known})")
        return problems
    try:
        public.verify(base64.b64decode(integrity["signature"], validate=True), signed_message(integrity))
    except (InvalidSignature, binascii.Error, ValueError):
        problems.append(
            f"the signature does not match the report's digest, key id and signing time with key {kid}"
        )
    return problems


def shown(text: str) -> str:
    """A string of the report in a message: as it is when printable and short; else quoted, with
    escapes, so a crafted value cannot break a message into lines (or pass for another one)."""
    if text.isprintable() and len(text) <= SHOWN_MAX_CHARS:
        return text
    return repr(text[:SHOWN_MAX_CHARS]) + ("…" if len(text) > SHOWN_MAX_CHARS else "")


def intact_line(integrity: Mapping) -> str:
    """What a verifier prints for an intact report."""
    return (
        f"intact: sha256 {integrity['sha256']}, signed by key {integrity['key_id']} "
        f"at {integrity['signed_at']}"
    )


def parse_keys(document: object) -> dict[str, Ed25519PublicKey]:
    """``{key_id: public key}`` from a published keys document (``{"keys": [{"key_id", "algorithm",
    "public_key", …}]}``). An entry whose id is not its key's id is refused: the id names the key."""
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise KeysError('not a keys document: expected {"keys": [...]}')
    keys = {}
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("public_key"), str):
            raise KeysError(f"key {number}: no public_key")
        if entry.get("algorithm", ALGORITHM) != ALGORITHM:
            continue  # a key for another algorithm: not ours to use
        try:
            public = public_from_b64(entry["public_key"])
        except ValueError as exc:
            raise KeysError(f"key {number}: public_key is not an Ed25519 key ({exc})") from None
        if entry.get("key_id") != key_id(public):
            raise KeysError(f"key {number}: key_id {entry.get('key_id')!r} is not the id of its public key")
        keys[key_id(public)] = public
    return keys


def load_keys(source: str, timeout_s: float = KEYS_TIMEOUT_S) -> dict[str, Ed25519PublicKey]:
    """The published keys from a file or an http(s) URL; KeysError says what went wrong."""
    if "://" in source:
        scheme = source.split("://", 1)[0].lower()
        if scheme not in ("http", "https"):
            raise KeysError(f"{source}: only http and https URLs are fetched")
        try:
            with urllib.request.urlopen(source, timeout=timeout_s) as response:  # noqa: S310 - scheme checked
                raw = response.read(KEYS_MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise KeysError(f"{source}: HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KeysError(f"{source}: cannot fetch the keys ({reason})") from None
    else:
        try:
            raw = Path(source).read_bytes()
        except OSError as exc:
            raise KeysError(f"{source}: {exc.strerror or exc}") from None
    if len(raw) > KEYS_MAX_BYTES:
        raise KeysError(f"{source}: larger than {KEYS_MAX_BYTES} bytes, not a keys document")
    try:
        document = parse_json(raw)
    except ValueError as exc:
        raise KeysError(f"{source}: {exc}") from None
    return parse_keys(document)


def parse_json(raw: bytes) -> object:
    """A JSON document; ValueError with a message for anything else (not UTF-8, not JSON, or nested
    deeper than Python's recursion limit lets ``json`` go)."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON ({exc})") from None
    except RecursionError:
        raise ValueError("not JSON Tollgate reads: nested too deeply") from None


def load_report(path: str) -> dict:
    """A downloaded report; ValueError says why it cannot be read."""
    try:
        document = parse_json(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a report (a JSON object is expected)")
    return document


def main(argv: list[str] | None = None, prog: str | None = "python -m portal.lib.security.signing") -> int:
    """``prog`` names the command in the usage line; None: the file as it was run (a downloaded copy)."""
    parser = argparse.ArgumentParser(prog=prog, description="Verify a signed Tollgate report offline.")
    parser.add_argument("file", help="the report JSON as downloaded")
    parser.add_argument(
        "--keys",
        required=True,
        help="the published keys: a file, or the URL of /.well-known/tollgate-report-keys.json",
    )
    args = parser.parse_args(argv)
    try:
        report = load_report(args.file)
        keys = load_keys(args.keys)
    except (ValueError, KeysError) as exc:
        print(f"not verified: {exc}", file=sys.stderr)
        return 1
    problems = verify(report, keys)
    if problems:
        for problem in problems:
            print(f"FAILED: {problem}", file=sys.stderr)
        return 1
    print(intact_line(report[INTEGRITY]))
    return 0


if __name__ == "__main__":
    # Run as a file (``python tollgate-verify-report.py``) it has no module spec: name the file.
    sys.exit(main(prog=None if __spec__ is None else "python -m portal.lib.security.signing"))
