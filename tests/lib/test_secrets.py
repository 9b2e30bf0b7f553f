"""Secrets at rest without Django: Fernet tokens, key rotation, clear errors, secret files."""

from __future__ import annotations

import ast
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from portal.lib.security import secrets
from portal.lib.security.secrets import InvalidKeyError, SecretError, Vault

ROOT = Path(__file__).resolve().parents[2]


def test_the_module_does_not_use_django():
    tree = ast.parse((ROOT / "portal/lib/security/secrets.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not [name for name in imported if name.split(".")[0] == "django"]


def test_round_trip_and_no_plaintext_in_the_token():
    vault = Vault([secrets.generate_key()])
    token = vault.seal({"auth": {"secret": "hunter2"}})
    assert "hunter2" not in token
    assert vault.unseal(token) == {"auth": {"secret": "hunter2"}}
    assert vault.unseal("") == {}
    assert vault.encrypt("x") != vault.encrypt("x")  # random IV: equal secrets are not linkable


def test_rotation_keeps_old_tokens_readable_and_moves_them_to_the_new_key():
    old, new = secrets.generate_key(), secrets.generate_key()
    token = Vault([old]).encrypt("s3cret")
    assert Vault([new, old]).decrypt(token) == "s3cret"
    rotated = Vault([new, old]).rotate(token)
    assert Vault([new]).decrypt(rotated) == "s3cret"
    with pytest.raises(SecretError, match="cannot be decrypted"):
        Vault([new]).decrypt(token)
    with pytest.raises(SecretError, match="cannot be decrypted"):
        Vault([new]).rotate(token)


def test_derived_key_depends_on_the_secret_it_is_derived_from():
    assert secrets.derive_key("a") == secrets.derive_key("a")
    token = Vault([secrets.derive_key("a")]).encrypt("x")
    with pytest.raises(SecretError):
        Vault([secrets.derive_key("another-secret-key-entirely")]).decrypt(token)


def test_a_malformed_or_missing_key_is_refused_without_echoing_it():
    good = secrets.generate_key()
    with pytest.raises(InvalidKeyError, match="key 2 of 2 is not a Fernet key") as caught:
        Vault([good, "not-a-fernet-key-3f9a"])
    assert "not-a-fernet-key-3f9a" not in str(caught.value)
    assert "Fernet.generate_key()" in str(caught.value)
    with pytest.raises(InvalidKeyError, match="no Fernet key"):
        Vault([" ", ""])


def test_generated_secret_key_is_long_and_random():
    first, second = secrets.generate_secret_key(), secrets.generate_secret_key()
    assert len(first) >= 50 and len(set(first)) >= 5 and first != second


def test_read_or_create_writes_once_with_mode_0600(tmp_path):
    path = tmp_path / "sub" / "secret_key"
    made = []

    def make() -> str:
        made.append(1)
        return f"value-{len(made)}"

    assert secrets.read_or_create(path, make) == "value-1"
    assert secrets.read_or_create(path, make) == "value-1"
    assert made == [1]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret_key"]  # no temporary files left
    path.write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        secrets.read_or_create(path, make)


def test_read_or_create_agrees_across_processes_starting_together(tmp_path):
    path = tmp_path / "fernet_keys"
    code = (
        "import sys, time\n"
        "from portal.lib.security import secrets\n"
        "time.sleep(max(0, float(sys.argv[1]) - time.time()))\n"
        "print(secrets.read_or_create(sys.argv[2], secrets.generate_key))\n"
    )
    import time

    start = str(time.time() + 1.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, start, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    values = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    assert values == {path.read_text().strip()}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fernet_keys"]
