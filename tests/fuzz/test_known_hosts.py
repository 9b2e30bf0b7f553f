"""The known_hosts parser (portal/lib/security/sshkeys.py): whatever a user pastes, ``key_from_known_hosts``
returns a key of a supported type whose blob names that type, or None — it never raises. A
well-formed entry for the host (plain or hashed, among other lines) is found; an entry for another
host or port never is. The private-key reader raises KeyFormatError with its message, nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

from hypothesis import example, given
from hypothesis import strategies as st

from portal.lib.security.sshkeys import (
    KEY_TYPES,
    KeyFormatError,
    PublicKey,
    key_from_known_hosts,
    load_private_key,
)
from tests.fuzz.budget import count, fuzz

HOSTS = st.one_of(
    st.sampled_from(["127.0.0.1", "::1", "example.com", "db-1.internal", "fe80::1%eth0"]),
    st.text(
        st.characters(exclude_categories=["Cs", "Zs", "Zl", "Zp", "Cc"], exclude_characters=",|#@"),
        min_size=1,
        max_size=30,
    ),
)
PORTS = st.integers(1, 65535)


def blob_of(key_type: str, payload: bytes) -> bytes:
    name = key_type.encode()
    return struct.pack(">I", len(name)) + name + payload


def hashed(name: str, salt: bytes) -> str:
    mac = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(mac).decode()}"


def name_of(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


B64ISH = st.one_of(
    st.binary(max_size=80).map(lambda b: base64.b64encode(b).decode()),
    st.builds(
        lambda t, p: base64.b64encode(blob_of(t, p)).decode(),
        st.sampled_from(KEY_TYPES),
        st.binary(max_size=64),
    ),
    st.text(max_size=40),
)
PATTERN = st.one_of(
    HOSTS,
    st.builds(name_of, HOSTS, PORTS),
    st.builds(hashed, HOSTS, st.binary(max_size=20)),
    st.sampled_from(["|1|", "|1|a|b|c", "|1|!!|??", "|1|YQ==|", "*", "!x", "@revoked", "#x"]),
    st.text(max_size=20),
)
LINE = st.one_of(
    st.builds(
        lambda patterns, key_type, encoded, tail: f"{','.join(patterns)} {key_type} {encoded}{tail}",
        st.lists(PATTERN, min_size=1, max_size=3),
        st.one_of(st.sampled_from(KEY_TYPES), st.text(max_size=12)),
        B64ISH,
        st.sampled_from(["", " comment", "\t", " a b c"]),
    ),
    st.text(max_size=120),
)


def _check_contract(text: str, host: str, port: int) -> PublicKey | None:
    found = key_from_known_hosts(text, host, port)
    if found is not None:
        assert isinstance(found, PublicKey) and found.key_type in KEY_TYPES
        (length,) = struct.unpack(">I", found.blob[:4])
        assert found.blob[4 : 4 + length].decode() == found.key_type
        assert found.fingerprint.startswith("SHA256:")
    return found


@given(lines=st.lists(LINE, max_size=8), host=HOSTS, port=PORTS)
@example(lines=["|1|a|b|c ssh-ed25519 AAAA"], host="x", port=22)
@example(lines=["127.0.0.1 ssh-rsa AAAAB3NzaC1yc2E"], host="127.0.0.1", port=22)  # truncated blob
@fuzz("known_hosts.text")
def test_any_text_gives_a_key_of_its_type_or_none(lines, host, port):
    count("known_hosts.text")
    _check_contract("\n".join(lines), host, port)


@given(
    noise=st.lists(LINE, max_size=5),
    host=HOSTS,
    port=PORTS,
    key_type=st.sampled_from(KEY_TYPES),
    payload=st.binary(min_size=1, max_size=64),
    salt=st.one_of(st.none(), st.binary(min_size=1, max_size=20)),
    other_port=PORTS,
)
@fuzz("known_hosts.entries")
def test_a_well_formed_entry_is_found_and_pins_only_its_host_and_port(
    noise, host, port, key_type, payload, salt, other_port
):
    count("known_hosts.entries")
    blob = blob_of(key_type, payload)
    name = name_of(host, port)
    entry = f"{name if salt is None else hashed(name, salt)} {key_type} {base64.b64encode(blob).decode()}"
    # The entry after the noise: the first matching line wins, and noise could pin the same host.
    found = _check_contract("\n".join([*noise, entry]), host, port)
    assert found is not None
    if found.blob != blob:  # a noise line happened to be a valid entry for this host first
        assert key_from_known_hosts("\n".join(noise), host, port) == found
    if other_port != port:
        assert _check_contract(entry, host, other_port) is None


@given(text=st.one_of(st.text(max_size=200), st.builds(
    "-----BEGIN {0} PRIVATE KEY-----\n{1}\n-----END {0} PRIVATE KEY-----".format,
    st.sampled_from(["OPENSSH", "EC", "RSA", ""]), B64ISH,
)))  # fmt: skip
@fuzz("known_hosts.private_key")
def test_a_pasted_private_key_is_a_key_or_a_key_format_error(text):
    count("known_hosts.private_key")
    try:
        load_private_key(text)
    except KeyFormatError as exc:
        assert "private key" in str(exc)
