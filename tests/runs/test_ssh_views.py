"""The target's SSH page on real PostgreSQL: keys generated or pasted, stored encrypted, never
rendered back; host keys pinned from a known_hosts line or forgotten; other users see nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal import vault
from portal.lib.security.sshkeys import generate_key, known_hosts_line, public_key_from_pem, public_line
from portal.targets.models import SshAccess
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def host_line() -> str:
    """A known_hosts line for the form's server, with a host key made here."""
    host_pem, _ = generate_key()
    return known_hosts_line("127.0.0.5", 2222, public_key_from_pem(host_pem))


@pytest.fixture
def target(client, owner):
    client.force_login(owner)
    return make_run(owner).target


def _post(client, target, **fields):
    data = {"host": "127.0.0.5", "port": "2222", "username": "probe", "server_process": "nginx", **fields}
    return client.post(reverse("target-ssh", args=[target.code]), data)


def test_generate_stores_the_key_encrypted_and_shows_only_the_public_half(client, target):
    response = _post(client, target, key_source="generate")
    assert response.status_code == 302
    access = SshAccess.objects.get(target=target)
    pem = vault.decrypt(access.private_key_enc)
    assert pem.splitlines()[0] == generate_key()[0].splitlines()[0]  # OpenSSH private key format
    assert public_key_from_pem(pem).key_type == "ssh-ed25519"
    assert "PRIVATE KEY" not in access.private_key_enc
    assert access.public_key == public_line(pem)
    page = client.get(reverse("target-ssh", args=[target.code])).content.decode()
    assert access.public_key.split()[1] in page
    assert "PRIVATE KEY-----" not in page and pem.splitlines()[1] not in page
    assert "not pinned yet" in page


def test_pasted_key_and_pinned_host_key(client, target, host_line):
    pem, public = generate_key()
    response = _post(client, target, key_source="paste", private_key=pem, known_hosts=host_line)
    assert response.status_code == 302
    access = SshAccess.objects.get(target=target)
    assert vault.decrypt(access.private_key_enc).strip() == pem.strip()
    assert access.public_key.split()[:2] == public.split()[:2]
    assert access.host_key_fingerprint.startswith("SHA256:") and access.pinned_at is not None
    # Keep the key, change nothing else: the stored key stays as it was.
    before = access.private_key_enc
    assert _post(client, target, key_source="keep", known_hosts=host_line).status_code == 302
    assert SshAccess.objects.get(target=target).private_key_enc == before
    # Forget the pin.
    client.post(reverse("target-ssh-forget", args=[target.code]))
    access.refresh_from_db()
    assert access.known_hosts == "" and access.host_key_fingerprint == "" and access.pinned_at is None


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"key_source": "paste", "private_key": "not a key"}, "private_key", "not an unencrypted"),
        ({"key_source": "paste", "private_key": ""}, "private_key", "Paste the private key"),
        (
            {"key_source": "generate", "known_hosts": "[127.0.0.9]:22 ssh-ed25519 AAAA"},
            "known_hosts",
            "No valid",
        ),
        ({"key_source": "generate", "server_process": "nginx; rm -rf /"}, "server_process", "process name"),
        ({"key_source": "generate", "port": "70000"}, "port", "less than or equal"),
        # The outbound address policy: only loopback is allowed here (tests/demo_mode.py).
        ({"key_source": "generate", "host": "10.0.0.5"}, "host", "10.0.0.5 is a private address"),
        ({"key_source": "generate", "host": "::ffff:a9fe:a9fe"}, "host", "169.254.169.254, a cloud metadata"),
        ({"key_source": "generate", "host": "0x7f.1@10.1"}, "host", "not a host name or address"),
    ],
)
def test_bad_input_shows_field_errors_and_stores_nothing(client, target, fields, field, message):
    response = _post(client, target, **fields)
    assert response.status_code == 200
    assert message in " ".join(response.context["form"].errors[field])
    assert not SshAccess.objects.filter(target=target).exists()


def test_another_user_cannot_see_or_change_the_access(client, target, django_user_model):
    _post(client, target, key_source="generate")
    client.force_login(django_user_model.objects.create_user("mallory", password="x-long-pass-1"))
    assert client.get(reverse("target-ssh", args=[target.code])).status_code == 404
    assert _post(client, target, key_source="generate").status_code == 404
    assert client.post(reverse("target-ssh-forget", args=[target.code])).status_code == 404


def test_targets_page_adds_a_target_before_its_first_run(client, owner, django_user_model):
    client.force_login(owner)
    url = reverse("targets-list")
    bad = client.post(url, {"name": "x", "plain_url": "https://wrong-scheme/", "tls_url": ""})
    assert bad.status_code == 200 and "plain_url" in bad.context["form"].errors
    empty = client.post(url, {"name": "x", "plain_url": "", "tls_url": ""})
    assert "Give a plain URL" in empty.content.decode()
    response = client.post(url, {"name": "shop", "plain_url": "", "tls_url": "https://127.0.0.1:8443/shop"})
    from portal.targets.models import Target

    target = Target.objects.get(project__personal_of=owner, name="shop")
    assert response.status_code == 302 and response.url == reverse("target-ssh", args=[target.code])
    page = client.get(url).content.decode()
    assert "shop" in page and reverse("target-ssh", args=[target.code]) in page
    client.force_login(django_user_model.objects.create_user("eve", password="x-long-pass-1"))
    assert "shop" not in client.get(url).content.decode()
