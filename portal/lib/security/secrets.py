"""Secrets at rest: Fernet (AES-128-CBC + HMAC-SHA256) with key rotation. Django-free.

A :class:`Vault` holds Fernet keys, newest first. The first key encrypts; every key decrypts, so
rotation is: put a new key in front, re-encrypt every token with :meth:`Vault.rotate`
(``manage.py tollgate rotate-secrets``), then drop the old key. The portal builds its vault from
settings in ``portal/vault.py``; where the keys come from is decided in ``portal/settings.py``.

Plaintext never goes into the database, a template or the report: callers keep only the token.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

KEY_HELP = 'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'


class SecretError(Exception):
    """A stored secret could not be decrypted (wrong or rotated-away key)."""


class InvalidKeyError(ValueError):
    """A configured key is not a Fernet key (the message never contains the key)."""


class Vault:
    """Fernet keys, newest first: the first encrypts, all decrypt."""

    def __init__(self, keys: Iterable[str]) -> None:
        keys = [key.strip() for key in keys if key.strip()]
        if not keys:
            raise InvalidKeyError(f"no Fernet key given; generate one with: {KEY_HELP}")
        fernets = []
        for number, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                raise InvalidKeyError(
                    f"key {number} of {len(keys)} is not a Fernet key (32 url-safe base64-encoded bytes); "
                    f"generate one with: {KEY_HELP}"
                ) from None
        self._fernet = MultiFernet(fernets)

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, ValueError) as exc:
            raise SecretError("a stored secret cannot be decrypted with the configured keys") from exc

    def rotate(self, token: str) -> str:
        """Re-encrypt a token with the first (newest) key."""
        try:
            return self._fernet.rotate(token.encode("ascii")).decode("ascii")
        except (InvalidToken, ValueError) as exc:
            raise SecretError("a stored secret cannot be decrypted with the configured keys") from exc

    def seal(self, data: dict) -> str:
        return self.encrypt(json.dumps(data, sort_keys=True))

    def unseal(self, token: str) -> dict:
        return json.loads(self.decrypt(token)) if token else {}


def generate_key() -> str:
    """A new random Fernet key."""
    return Fernet.generate_key().decode("ascii")


def derive_key(secret_key: str) -> str:
    """A Fernet key derived from another secret (demo mode only: one leaked secret then opens both)."""
    digest = hashlib.sha256(b"tollgate-secrets/1:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")


def generate_secret_key() -> str:
    """A random Django SECRET_KEY (67 characters, passes ``check --deploy``)."""
    return secrets.token_urlsafe(50)


def read_or_create(path: Path | str, make: Callable[[], str]) -> str:
    """The content of ``path`` (stripped); on first use ``make()`` is written there, mode 0600.

    Safe when several processes start together: each writes its value to a private temporary file
    (O_EXCL, 0600) and publishes it with ``os.link``, which fails when the file exists. Exactly one
    value wins, everyone reads that one, and nobody ever sees a half-written file.
    """
    path = Path(path)
    if not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(make() + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another process was first: use its value
                os.link(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    value = path.read_text().strip()
    if not value:
        raise ValueError(f"{path} is empty")
    return value
