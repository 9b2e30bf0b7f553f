"""Secrets at rest for the portal: ``portal.lib.security.secrets.Vault`` with the keys of the settings.

``settings.TOLLGATE_SECRET_KEYS`` (Fernet keys, newest first; ``portal/settings.py`` decides where
they come from and refuses to start without them) is read on every call, so an overridden setting
takes effect at once.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from portal.lib.security.secrets import InvalidKeyError, SecretError, Vault, generate_key

__all__ = ["SecretError", "decrypt", "encrypt", "generate_key", "rotate", "seal", "unseal"]


def _vault() -> Vault:
    return _vault_of(tuple(settings.TOLLGATE_SECRET_KEYS))


@functools.lru_cache(maxsize=4)
def _vault_of(keys: tuple[str, ...]) -> Vault:
    """Built once per key list (``rotate-secrets`` calls this for every stored token); a changed
    setting is a new key list, so it still takes effect at once."""
    try:
        return Vault(list(keys))
    except InvalidKeyError as exc:
        raise ImproperlyConfigured(f"TOLLGATE_SECRET_KEYS: {exc}") from None


def encrypt(plaintext: str) -> str:
    return _vault().encrypt(plaintext)


def decrypt(token: str) -> str:
    return _vault().decrypt(token)


def rotate(token: str) -> str:
    """Re-encrypt a token with the first (newest) key."""
    return _vault().rotate(token)


def seal(data: dict) -> str:
    return _vault().seal(data)


def unseal(token: str) -> dict:
    return _vault().unseal(token)
