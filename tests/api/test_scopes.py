"""Who a token acts as, and where: only its project, only its scope, only while it is valid and its
user is still a member. Every answer here goes through the whole request stack (middleware, DRF)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.api import tokens
from portal.api.models import ApiToken
from portal.audit.models import AuditEvent
from portal.projects.models import Invitation, Project
from portal.runs.models import Run
from tests.api.conftest import assert_error, inline

pytestmark = pytest.mark.django_db


def ids(response) -> set[str]:
    return {row["id"] for row in response.json()["results"]}


def test_a_token_sees_only_its_own_project(client, world, bearer):
    a, b = world["a"], world["b"]
    auth = bearer(world["users"]["owner"], a.project)
    assert ids(client.get("/api/v1/runs", **auth)) == {str(r.code) for r in a.runs}
    targets = client.get("/api/v1/targets", **auth).json()["results"]
    assert {t["id"] for t in targets} == {str(a.runs[0].target.code), str(a.scenario.target.code)}
    target = a.runs[0].target
    target.mtls_url = "https://127.0.0.1:8444/1k"  # the tls_mtls arm's own port, as the demo's
    target.save(update_fields=["mtls_url"])
    listed = {t["id"]: t for t in client.get("/api/v1/targets", **auth).json()["results"]}
    assert listed[str(target.code)]["mtls_url"] == "https://127.0.0.1:8444/1k"
    assert listed[str(a.scenario.target.code)]["mtls_url"] in ("", target.mtls_url)
    scenarios = client.get("/api/v1/scenarios", **auth).json()["results"]
    assert [s["id"] for s in scenarios] == [str(a.scenario.code)]
    # B's run is as unknown as a made-up one: the same 404, no hint it exists.
    other = b.runs[0].code
    for path in (f"/api/v1/runs/{other}", f"/api/v1/runs/{other}/report"):
        body = assert_error(client.get(path, **auth), 404)
        assert body["detail"] == "No such run."
    run_auth = bearer(world["users"]["owner"], a.project, "run")
    assert_error(client.post(f"/api/v1/runs/{other}/cancel", **run_auth), 404)
    assert_error(client.post(f"/api/v1/runs/{other}/shares", {}, "application/json", **run_auth), 404)
    assert_error(client.post(f"/api/v1/runs/{other}/baseline", **run_auth), 404)
    assert Run.objects.get(code=other).status == Run.Status.SUCCEEDED


def test_a_token_of_a_member_of_both_projects_still_sees_one(client, world, bearer):
    a, b = world["a"], world["b"]
    outsider = world["users"]["outsider"]  # owner of B; make them a viewer of A too
    a.project.memberships.create(user=outsider, role="viewer")
    assert ids(client.get("/api/v1/runs", **bearer(outsider, b.project))) == {str(r.code) for r in b.runs}
    assert ids(client.get("/api/v1/runs", **bearer(outsider, a.project))) == {str(r.code) for r in a.runs}
    assert_error(client.get(f"/api/v1/runs/{a.runs[0].code}", **bearer(outsider, b.project)), 404)


def test_a_read_token_may_not_post(client, world, bearer):
    a = world["a"]
    auth = bearer(world["users"]["owner"], a.project, "read")
    before = Run.objects.count()
    body = assert_error(client.post("/api/v1/runs", inline(), "application/json", **auth), 403)
    assert "read" in body["detail"]
    assert_error(client.post(f"/api/v1/runs/{a.runs[0].code}/cancel", **auth), 403)
    assert_error(client.post(f"/api/v1/runs/{a.runs[0].code}/shares", {}, "application/json", **auth), 403)
    assert_error(client.post(f"/api/v1/runs/{a.runs[0].code}/baseline", **auth), 403)
    assert Run.objects.count() == before
    assert client.get(f"/api/v1/runs/{a.runs[0].code}", **auth).status_code == 200


def test_a_run_token_needs_the_member_role(client, world, bearer):
    # Made behind the page's back (the page and the CLI refuse it): the role is checked per request.
    a = world["a"]
    viewer_run = bearer(world["users"]["viewer"], a.project, "run")
    assert client.get("/api/v1/runs", **viewer_run).status_code == 200
    body = assert_error(client.post("/api/v1/runs", inline(), "application/json", **viewer_run), 403)
    assert "member" in body["detail"]
    member_run = bearer(world["users"]["member"], a.project, "run")
    assert client.post("/api/v1/runs", inline(), "application/json", **member_run).status_code == 201


@pytest.mark.parametrize(
    "header",
    ["Bearer tg_unknown", "Bearer " + "tg_" + "x" * 43, "Bearer", "Bearer a b", "Bearer \u00e9t\u00e9"],
)
def test_unknown_or_malformed_tokens_are_401(client, world, header):
    response = client.get("/api/v1/runs", HTTP_AUTHORIZATION=header.encode().decode("latin-1"))
    assert_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_no_token_is_401_and_a_session_is_not_accepted(client, world):
    response = client.get("/api/v1/runs")
    assert_error(response, 401)
    assert response["WWW-Authenticate"].startswith("Bearer")
    client.force_login(world["users"]["owner"])  # a browser's session cookie never acts on the API
    assert_error(client.get("/api/v1/runs"), 401)
    assert_error(client.post("/api/v1/runs", inline(), "application/json"), 401)


def test_a_revoked_token_is_401(client, world):
    token, plaintext = tokens.issue(world["users"]["owner"], world["a"].project, scope="run", name="ci")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    assert client.get("/api/v1/runs", **auth).status_code == 200
    assert tokens.revoke(token)
    body = assert_error(client.get("/api/v1/runs", **auth), 401)
    assert body["detail"] == "Unknown or revoked token."
    assert_error(client.post("/api/v1/runs", inline(), "application/json", **auth), 401)


def test_a_user_removed_from_the_project_loses_its_tokens_for_good(client, world, bearer):
    """Removal revokes the member's tokens of that project (audited): added back, they must make
    new ones. Their tokens of other projects stay."""
    a, member = world["a"], world["users"]["member"]
    auth = bearer(member, a.project, "run")
    other = Project.objects.create(name="gamma")
    other.memberships.create(user=member, role="member")
    elsewhere = bearer(member, other, "read")
    assert client.get("/api/v1/runs", **auth).status_code == 200
    client.force_login(world["users"]["owner"])
    members = f"/projects/{a.project.code}/members/"
    removed = client.post(members, {"username": "member", "role": "member", "action": "remove"})
    assert removed.status_code == 302
    body = assert_error(client.get("/api/v1/runs", **auth), 401)
    assert body["detail"] == "Unknown or revoked token."
    assert ApiToken.objects.get(user=member, project=a.project).revoked_at is not None
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.CREDENTIAL_FORGOTTEN).get()
    assert event.detail["credential"] == "api_token" and event.project_id == a.project.pk
    # Invited back and accepted: the old token stays revoked.
    assert client.post(members, {"username": "member", "role": "member", "action": "add"}).status_code == 302
    client.force_login(member)
    invitation = Invitation.objects.get(project=a.project, username="member")
    client.post(f"/projects/invitations/{invitation.code}/accept/")
    assert a.project.memberships.filter(user=member, role="member").exists()
    assert_error(client.get("/api/v1/runs", **auth), 401)
    assert client.get("/api/v1/runs", **elsewhere).status_code == 200
    # Removed by other means (the admin, a deleted row): revoked all the same.
    token, plaintext = tokens.issue(member, a.project, scope="read", name="again")
    a.project.memberships.filter(user=member).delete()
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_a_member_demoted_to_viewer_reads_but_does_not_start(client, world, bearer):
    a = world["a"]
    auth = bearer(world["users"]["member"], a.project, "run")
    a.project.memberships.filter(user=world["users"]["member"]).update(role="viewer")
    assert client.get("/api/v1/runs", **auth).status_code == 200
    assert_error(client.post("/api/v1/runs", inline(), "application/json", **auth), 403)


def test_an_inactive_user_loses_the_api(client, world, bearer):
    user = world["users"]["owner"]
    auth = bearer(user, world["a"].project)
    user.is_active = False
    user.save()
    assert_error(client.get("/api/v1/runs", **auth), 401)


def test_only_a_digest_is_stored_and_last_use_is_written_once_a_minute(client, world):
    token, plaintext = tokens.issue(world["users"]["owner"], world["a"].project, scope="read", name="ci")
    assert plaintext.startswith("tg_") and len(plaintext) >= 3 + 43  # 256 random bits
    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert plaintext not in str(row) and row["token_hash"] == tokens.digest(plaintext)
    assert row["prefix"] == plaintext[:8] and row["last_used"] is None
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    client.get("/api/v1/targets", **auth)
    first = ApiToken.objects.get(pk=token.pk).last_used
    assert first is not None
    client.get("/api/v1/targets", **auth)
    assert ApiToken.objects.get(pk=token.pk).last_used == first  # within the minute: not rewritten
    ApiToken.objects.filter(pk=token.pk).update(last_used=first - timedelta(minutes=2))
    client.get("/api/v1/targets", **auth)
    assert ApiToken.objects.get(pk=token.pk).last_used > first - timedelta(seconds=1)
    assert ApiToken.objects.get(pk=token.pk).last_used <= timezone.now()
