"""The portal's vault: portal.lib.security.secrets.Vault with the Fernet keys of the settings."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal import vault
from portal.lib.security import secrets


def test_round_trip_with_the_configured_keys(settings):
    token = vault.seal({"auth": {"secret": "hunter2"}})
    assert "hunter2" not in token
    assert vault.unseal(token) == {"auth": {"secret": "hunter2"}}
    assert secrets.Vault(settings.TOLLGATE_SECRET_KEYS).decrypt(vault.encrypt("x")) == "x"
    assert vault.SecretError is secrets.SecretError


def test_rotation_follows_the_settings(settings):
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


def test_no_keys_fail_closed(settings):
    settings.TOLLGATE_SECRET_KEYS = []
    with pytest.raises(ImproperlyConfigured, match="TOLLGATE_SECRET_KEYS"):
        vault.encrypt("a")
