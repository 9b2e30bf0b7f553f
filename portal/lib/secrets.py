"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256) with key rotation.

Keys come from ``TOLLGATE_SECRET_KEYS`` (comma-separated Fernet keys, newest first). The first key
encrypts; every key decrypts, so rotation is: put a new key in front, run
``manage.py tollgate rotate-secrets`` (re-encrypts with the first key), then drop the old key.
Without the variable, one key is derived from Django's ``SECRET_KEY`` (fine for a demo; set real keys
in production so that a leaked SECRET_KEY alone does not open the secrets).

Plaintext never goes into the database, a template or the report: callers keep only the token.
"""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


class SecretError(Exception):
    """A stored secret could not be decrypted (wrong or rotated-away key)."""


def _keys() -> list[bytes]:
    configured = [k.strip() for k in getattr(settings, "TOLLGATE_SECRET_KEYS", []) if k.strip()]
    if configured:
        return [k.encode("ascii") for k in configured]
    digest = hashlib.sha256(b"tollgate-secrets/1:" + settings.SECRET_KEY.encode()).digest()
    return [base64.urlsafe_b64encode(digest)]


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in _keys()])


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, ValueError) as exc:
        raise SecretError("a stored secret cannot be decrypted with the configured keys") from exc


def rotate(token: str) -> str:
    """Re-encrypt a token with the first (newest) key."""
    try:
        return _fernet().rotate(token.encode("ascii")).decode("ascii")
    except InvalidToken as exc:
        raise SecretError("a stored secret cannot be decrypted with the configured keys") from exc


def seal(data: dict) -> str:
    return encrypt(json.dumps(data, sort_keys=True))


def unseal(token: str) -> dict:
    return json.loads(decrypt(token)) if token else {}


def generate_key() -> str:
    return Fernet.generate_key().decode("ascii")
