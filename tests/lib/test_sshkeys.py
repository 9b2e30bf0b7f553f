"""SSH key handling without paramiko, checked against OpenSSH's own tools (ssh-keygen)."""

from __future__ import annotations

import subprocess

import pytest

from portal.lib.security.sshkeys import (
    KeyFormatError,
    generate_key,
    key_from_known_hosts,
    known_hosts_line,
    load_private_key,
    public_key_from_pem,
    public_line,
)


def _keygen(tmp_path, kind: str, bits: str | None = None, fmt: str | None = None) -> tuple[str, str]:
    path = tmp_path / f"key-{kind}-{bits}-{fmt}"
    cmd = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)]
    cmd += ["-b", bits] if bits else []
    cmd += ["-m", fmt] if fmt else []
    subprocess.run(cmd, check=True)  # noqa: S603
    return path.read_text(), (tmp_path / f"{path.name}.pub").read_text()


@pytest.mark.parametrize(
    ("kind", "bits", "fmt"),
    [("ed25519", None, None), ("ecdsa", "256", None), ("rsa", "2048", None), ("rsa", "2048", "PEM")],
)
def test_keys_made_by_ssh_keygen_load_and_give_its_public_line_and_fingerprint(tmp_path, kind, bits, fmt):
    pem, pub = _keygen(tmp_path, kind, bits, fmt)
    assert public_line(pem).split()[:2] == pub.split()[:2]
    pub_file = tmp_path / "check.pub"
    pub_file.write_text(pub)
    expected = subprocess.run(  # noqa: S603
        ["ssh-keygen", "-lf", str(pub_file)], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert public_key_from_pem(pem).fingerprint == expected


def test_generated_key_is_openssh_ed25519_that_ssh_keygen_reads(tmp_path):
    pem, public = generate_key()
    path = tmp_path / "k"
    path.write_text(pem)
    path.chmod(0o600)
    derived = subprocess.run(  # noqa: S603
        ["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True
    ).stdout
    assert public.startswith("ssh-ed25519 ") and public.split()[:2] == derived.split()[:2]


def _armour_without_a_key() -> str:
    """A generated key's armour lines around a body that is no key (nothing secret is committed)."""
    lines = generate_key()[0].splitlines()
    return f"{lines[0]}\nAAAA\n{lines[-1]}\n"


@pytest.mark.parametrize("make", [lambda: "", lambda: "not a key", _armour_without_a_key, lambda: "\xff"])
def test_anything_else_is_a_clear_key_format_error(make):
    with pytest.raises(KeyFormatError, match="not an unencrypted OpenSSH/PEM"):
        load_private_key(make())


def test_an_encrypted_key_is_refused(tmp_path):
    path = tmp_path / "enc"
    subprocess.run(  # noqa: S603
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret-pass", "-f", str(path)], check=True
    )
    with pytest.raises(KeyFormatError):
        load_private_key(path.read_text())


def test_known_hosts_finds_plain_and_hashed_entries_per_port(tmp_path):
    host_pem, _ = generate_key()
    key = public_key_from_pem(host_pem)
    line22 = known_hosts_line("srv.example", 22, key)
    line2222 = known_hosts_line("10.0.0.5", 2222, key)
    assert line2222.startswith("[10.0.0.5]:2222 ssh-ed25519 ")
    assert key_from_known_hosts(line22, "srv.example", 22) == key
    assert key_from_known_hosts(line22, "srv.example", 2222) is None
    assert key_from_known_hosts(line2222, "10.0.0.5", 2222) == key
    # OpenSSH's hashed form, made by ssh-keygen -H itself.
    path = tmp_path / "known_hosts"
    path.write_text(line2222 + "\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(path)], check=True, capture_output=True)  # noqa: S603
    hashed = path.read_text()
    assert hashed.startswith("|1|")
    assert key_from_known_hosts(hashed, "10.0.0.5", 2222) == key
    assert key_from_known_hosts(hashed, "10.0.0.6", 2222) is None


ED25519_BLOB = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.mark.parametrize(
    "text",
    [
        "# comment only",
        "srv.example ssh-ed25519",
        "srv.example ssh-ed25519 !!!notbase64",
        "srv.example ssh-rsa " + ED25519_BLOB,  # the blob's own type disagrees
        "@revoked srv.example ssh-ed25519 " + ED25519_BLOB,
        "srv.example ssh-dss AAAAB3NzaC1kc3MAAACBAP",
    ],
)
def test_malformed_or_mismatched_lines_pin_nothing(text):
    assert key_from_known_hosts(text, "srv.example", 22) is None
