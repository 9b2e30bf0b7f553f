"""Secrets at rest: Fernet tokens, key rotation, and a clear error for a key that is gone."""

from __future__ import annotations

import pytest

from portal.lib import secrets as vault


def test_round_trip_and_no_plaintext_in_the_token():
    token = vault.seal({"auth": {"secret": "hunter2"}})
    assert "hunter2" not in token
    assert vault.unseal(token) == {"auth": {"secret": "hunter2"}}
    assert vault.encrypt("x") != vault.encrypt("x")  # random IV: equal secrets are not linkable


def test_rotation_keeps_old_tokens_readable_and_moves_them_to_the_new_key(settings):
    old, new = vault.generate_key(), vault.generate_key()
    settings.TOLLGATE_SECRET_KEYS = [old]
    token = vault.encrypt("s3cret")
    settings.TOLLGATE_SECRET_KEYS = [new, old]
    assert vault.decrypt(token) == "s3cret"
    rotated = vault.rotate(token)
    settings.TOLLGATE_SECRET_KEYS = [new]
    assert vault.decrypt(rotated) == "s3cret"
    with pytest.raises(vault.SecretError, match="cannot be decrypted"):
        vault.decrypt(token)


def test_default_key_is_derived_from_secret_key(settings):
    settings.TOLLGATE_SECRET_KEYS = []
    token = vault.encrypt("a")
    settings.SECRET_KEY = "another-secret-key-entirely"
    with pytest.raises(vault.SecretError):
        vault.decrypt(token)
