"""``/.well-known/tollgate-report-keys.json``: public (no login), cacheable, every key that ever
signed, public halves only; ``/.well-known/tollgate-verify-report.py``: the verifier that reads them,
portal/lib/security/signing.py as it is (NOT_OURS in tests/projects/test_permissions.py points here)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from django.urls import reverse

from portal.lib.security import signing
from portal.signing import services

pytestmark = pytest.mark.django_db

URL = "/.well-known/tollgate-report-keys.json"
VERIFIER_URL = "/.well-known/tollgate-verify-report.py"


def test_the_published_keys_need_no_login_and_list_active_and_retired_keys(client):
    assert reverse("signing-keys") == URL
    assert client.get(URL).json() == {"keys": []}  # nothing signed yet: nothing made
    first = services.active_key()
    second, _ = services.rotate_key()
    response = client.get(URL)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "public" in response["Cache-Control"] and "max-age=300" in response["Cache-Control"]
    assert response["Access-Control-Allow-Origin"] == "*"
    keys = response.json()["keys"]
    assert [k["key_id"] for k in keys] == [first.key_id, second.key_id]
    assert set(keys[0]) == {"key_id", "algorithm", "public_key", "created", "retired"}
    assert keys[0]["retired"] and keys[1]["retired"] is None
    assert all(k["algorithm"] == "Ed25519" for k in keys)
    # The document is what the verifier reads, and its ids name its keys.
    assert set(signing.parse_keys(response.json())) == {first.key_id, second.key_id}
    # Public halves only.
    body = response.content.decode()
    for key in (first, second):
        private = services.private_key(key).private_bytes_raw()
        assert base64.b64encode(private).decode() not in body and private.hex() not in body
        assert key.private_key_enc not in body


def test_the_published_keys_are_read_only(client, owner):
    assert client.post(URL).status_code == 405
    client.force_login(owner)
    assert client.post(URL).status_code == 405
    assert client.get(URL).status_code == 200


def test_the_keys_download_as_a_file(client):
    services.active_key()
    response = client.get(URL + "?download=1")
    assert response["Content-Disposition"] == 'attachment; filename="tollgate-report-keys.json"'
    assert set(signing.parse_keys(response.json())) == {services.active_key().key_id}
    assert "Content-Disposition" not in client.get(URL)


def test_the_verifier_is_the_signing_module_itself_public_and_read_only(client, owner):
    assert reverse("signing-verifier") == VERIFIER_URL
    source = Path(signing.__file__).read_bytes()
    shown = client.get(VERIFIER_URL)  # no login: an auditor has no account
    assert shown.status_code == 200 and shown.content == source
    assert shown["Content-Type"] == "text/plain; charset=utf-8"  # read in the browser, never run there
    assert "Content-Disposition" not in shown and "public" in shown["Cache-Control"]
    downloaded = client.get(VERIFIER_URL + "?download=1")
    assert downloaded.content == source
    assert downloaded["Content-Disposition"] == 'attachment; filename="tollgate-verify-report.py"'
    assert client.post(VERIFIER_URL).status_code == 405
    client.force_login(owner)
    assert client.post(VERIFIER_URL).status_code == 405
    # It imports nothing of the portal or Django: what an auditor runs without installing Tollgate.
    imports = [
        line.split()[1] for line in source.decode().splitlines() if line.startswith(("import ", "from "))
    ]
    assert not [name for name in imports if name.split(".")[0] in ("django", "portal", "tests", "workers")]
