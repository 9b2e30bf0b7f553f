"""The Tokens page and ``tollgate token``: a token is shown once, stored as a digest, works on the
API until revoked; creation and revocation are audited; nobody revokes another user's token."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from portal.api import tokens
from portal.api.models import ApiToken
from portal.audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def create(client, project, scope: str = "run", name: str = "ci"):
    return client.post("/tokens/", {"name": name, "project": str(project.code), "scope": scope})


def test_a_token_made_on_the_page_is_shown_once_and_works(client, world):
    a, owner = world["a"], world["users"]["owner"]
    client.force_login(owner)
    response = create(client, a.project)
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    page = response.content.decode()
    plaintext = re.search(r'<code id="token-value">(tg_[\w-]+)</code>', page).group(1)
    token = ApiToken.objects.get(user=owner)
    assert (token.name, token.scope, token.project) == ("ci", "run", a.project)
    assert token.token_hash == tokens.digest(plaintext) and plaintext not in str(vars(token))
    listing = client.get("/tokens/").content.decode()
    assert plaintext not in listing and token.prefix in listing and "never" in listing
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    assert client.get("/api/v1/runs", **auth).status_code == 200
    assert "never" not in client.get("/tokens/").content.decode()  # its last use is shown
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CREDENTIAL_SAVED)
    assert event.actor == owner and event.project_id == a.project.pk
    assert event.detail["credential"] == "api_token" and plaintext not in json.dumps(event.detail)

    response = client.post(f"/tokens/{token.code}/revoke/")
    assert response.status_code == 302
    assert client.get("/api/v1/runs", **auth).status_code == 401
    assert "revoked" in client.get("/tokens/").content.decode()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CREDENTIAL_FORGOTTEN)
    assert event.actor == owner and event.detail["token"] == str(token.code)


def test_only_projects_of_the_user_and_run_scope_only_for_members(client, world):
    a, b = world["a"], world["b"]
    client.force_login(world["users"]["viewer"])
    response = create(client, b.project, scope="read")  # not theirs: not a choice
    assert "project" in response.context["form"].errors
    response = create(client, a.project, scope="run")
    assert "member role" in response.context["form"].errors["scope"][0]
    assert create(client, a.project, scope="read").context["created"] is not None
    assert list(ApiToken.objects.values_list("scope", flat=True)) == ["read"]


def test_nobody_revokes_another_users_token(client, world):
    token, plaintext = tokens.issue(world["users"]["owner"], world["a"].project, scope="read", name="x")
    client.force_login(world["users"]["member"])
    assert client.post(f"/tokens/{token.code}/revoke/").status_code == 404
    assert client.get(f"/tokens/{token.code}/revoke/").status_code == 405
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert token.prefix not in client.get("/tokens/").content.decode()  # nor sees it


def cli(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("tollgate", "token", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_cli_creates_lists_and_revokes(client, world):
    out, _ = cli(
        "create", "--user", "member", "--project", "alpha", "--scope", "run", "--name", "ci", "--json"
    )
    made = json.loads(out)
    assert set(made) == {"token", "id", "name", "scope", "project"}
    assert (made["name"], made["scope"], made["project"]) == ("ci", "run", "alpha")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {made['token']}"}
    assert client.get("/api/v1/runs", **auth).status_code == 200
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.CREDENTIAL_SAVED).get().actor_name == "member"

    listed, _ = cli("list", "--user", "member", "--json")
    rows = json.loads(listed)
    assert [r["id"] for r in rows] == [made["id"]] and made["token"] not in listed
    assert rows[0]["last_used"] is not None and rows[0]["revoked_at"] is None

    out, _ = cli("revoke", made["id"])
    assert "revoked" in out
    assert client.get("/api/v1/runs", **auth).status_code == 401
    assert "revoked already" in cli("revoke", made["id"])[0]
    assert "revoked" in cli("list")[0]


def test_the_cli_prints_the_token_once_with_a_warning(world):
    out, err = cli("create", "--user", "viewer", "--project", "alpha", "--name", "grafana")
    assert out.strip().startswith("tg_") and "shown only this once" in err
    assert ApiToken.objects.get().scope == "read"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create", "--user", "outsider", "--project", "alpha", "--name", "x"), "not a member"),
        (("create", "--user", "viewer", "--project", "alpha", "--scope", "run", "--name", "x"), "run token"),
        (("create", "--user", "nobody", "--project", "alpha", "--name", "x"), "no user"),
        (("create", "--user", "owner", "--project", "gamma", "--name", "x"), "no project"),
        (("create", "--user", "owner", "--project", "alpha", "--name", " "), "--name"),
        (("revoke", "not-a-uuid"), "no token"),
        (("revoke", "00000000-0000-0000-0000-000000000000"), "no token"),
    ],
)
def test_the_cli_refuses_with_one_line(world, args, message):
    with pytest.raises(CommandError, match=message):
        cli(*args)
    assert not ApiToken.objects.exists()
