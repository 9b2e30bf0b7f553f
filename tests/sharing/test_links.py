"""Share links over the real request stack: tokens stored hashed, the public pages and their headers,
expiry and revocation (410, saying which), wrong tokens (404), every view logged, who may create
and revoke, the owner's lists."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.lib.security import signing
from portal.projects.models import Membership, Project, Role
from portal.runs.models import Run
from portal.sharing import services
from portal.sharing.models import ShareLink, ShareView
from portal.signing.services import freeze, public_keys
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

UA = "Mozilla/5.0 (auditor's laptop) " + "x" * 400


def share(team, who="owner", **kwargs):
    kwargs.setdefault("run", team["runs"][0])
    return services.create_share(team["users"][who], **kwargs)


def paths(token: str) -> dict:
    return {
        "page": f"/s/{token}/",
        "json": f"/s/{token}/report.json",
        "csv": f"/s/{token}/report.csv",
        "status": f"/s/{token}/status.json",
    }


def assert_shared_headers(response) -> None:
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    assert response["Cache-Control"] == "no-store"
    assert "Set-Cookie" not in response


def test_token_has_192_bits_and_the_database_keeps_only_its_hash(team):
    link, token = share(team, note="Q3 audit, PCI 4.1", days=7)
    assert len(token) == 32 and re.fullmatch(r"[A-Za-z0-9_-]{32}", token)  # token_urlsafe(24)
    assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
    other_link, other = share(team)
    assert other != token and other_link.token_hash != link.token_hash
    # Nowhere in the sharing or audit tables, in any column, is the token itself.
    with connection.cursor() as cursor:
        for table in ("sharing_sharelink", "sharing_shareview", "audit_auditevent"):
            cursor.execute(f"SELECT row_to_json(t)::text FROM {table} t")  # noqa: S608
            dump = " ".join(row[0] for row in cursor.fetchall())
            assert token not in dump and other not in dump
    assert (link.expires_at - link.created).days in (6, 7)
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.CREDENTIAL_SAVED, detail__credential="share link")
    assert events.count() == 2 and events.filter(detail__link=str(link.code), actor_name="owner").exists()


def test_shared_page_and_downloads_show_the_report_and_log_every_view(client, team):
    run = team["runs"][0]
    link, token = share(team, note="Q3 audit, PCI 4.1")
    page = client.get(paths(token)["page"], HTTP_USER_AGENT=UA)
    assert page.status_code == 200
    assert_shared_headers(page)
    html = page.content.decode()
    assert '<meta name="robots" content="noindex' in html
    assert "Q3 audit, PCI 4.1" in html and run.summary["headline"] in html
    for section in ('id="costs"', 'id="validity"', 'id="charts"', 'id="method"', 'id="chart-data"'):
        assert section in html
    # Nothing of the portal: no navigation, no other page of it.
    assert (
        "<nav" not in html
        and "/runs/" not in html
        and "/targets/" not in html
        and "csrfmiddlewaretoken" not in html
    )

    report = client.get(paths(token)["json"] + "?download=1", REMOTE_ADDR="2001:db8:1234:5678::1")
    assert report.status_code == 200 and report["Content-Disposition"].startswith("attachment")
    assert report.json()["run"]["id"] == str(run.code) and report.json()["costs"]
    assert_shared_headers(report)
    rows = client.get(paths(token)["csv"]).content.decode().splitlines()
    assert rows[0] == "run,arm,metric,statistic,value,unit,samples" and len(rows) > 20
    status = client.get(paths(token)["status"]).json()
    assert status["status"] == "succeeded" and status["headline"] == run.summary["headline"]
    assert status["costs"] == run.summary["costs"] and status["share_url"] == f"http://testserver/s/{token}/"
    assert status["report_json_url"] == f"http://testserver/s/{token}/report.json"

    link.refresh_from_db()
    assert link.view_count == 4 and link.last_viewed_at is not None
    # CI's polling: the same client's polls within a minute are that one logged view (the last view
    # time still moves); another client's poll is a view of its own.
    first_seen = link.last_viewed_at
    assert client.get(paths(token)["status"]).status_code == 200
    link.refresh_from_db()
    assert link.view_count == 4 and link.last_viewed_at > first_seen
    assert client.get(paths(token)["status"], HTTP_USER_AGENT="other-ci").status_code == 200
    link.refresh_from_db()
    assert link.view_count == 5
    ShareView.objects.filter(link=link, user_agent="other-ci").delete()
    ShareLink.objects.filter(pk=link.pk).update(view_count=4)
    views = list(ShareView.objects.filter(link=link).order_by("at", "pk"))
    assert [v.what for v in views] == ["page", "report.json", "report.csv", "status.json"]
    assert views[0].ip == "127.0.0.0/24" and views[1].ip == "2001:db8:1234::/48"
    assert views[0].user_agent == UA[:300] and len(views[0].user_agent) == 300
    # Read-only: other methods are refused, with the same headers, and not counted.
    for method in ("post", "put", "delete"):
        refused = getattr(client, method)(paths(token)["page"])
        assert refused.status_code == 405
        assert_shared_headers(refused)
    assert ShareLink.objects.get(pk=link.pk).view_count == 4


@pytest.mark.parametrize("token", ["x" * 32, "A" * 200, "%00", "a.b"])
def test_a_wrong_token_is_404_with_the_same_headers(client, team, token):
    share(team)
    for path in paths(token).values():
        response = client.get(path)
        assert response.status_code == 404, path
        assert_shared_headers(response)
    assert "No such share link" in client.get(paths(token)["page"]).content.decode()
    assert client.get(paths(token)["json"]).json()["status"] == 404
    assert ShareView.objects.count() == 0


def test_an_expired_link_is_410_and_says_when(client, team):
    link, token = share(team, days=1)
    assert client.get(paths(token)["page"]).status_code == 200
    past = timezone.now() - timedelta(minutes=5)
    ShareLink.objects.filter(pk=link.pk).update(expires_at=past)
    page = client.get(paths(token)["page"])
    assert page.status_code == 410
    assert_shared_headers(page)
    html = page.content.decode()
    assert "This share link has expired" in html and f"expired on {past:%Y-%m-%d %H:%M} UTC" in html
    assert "revoked" not in html
    for name in ("json", "status"):
        answer = client.get(paths(token)[name])
        assert answer.status_code == 410 and "expired on" in answer.json()["detail"]
    assert client.get(paths(token)["csv"]).status_code == 410
    link.refresh_from_db()
    assert link.view_count == 1 and ShareView.objects.filter(link=link).count() == 1


def test_a_revoked_link_is_410_and_says_so(client, team):
    link, token = share(team, who="member")
    client.force_login(team["users"]["owner"])  # a project owner revokes a member's link
    run_page = reverse("runs-detail", args=[team["runs"][0].code])
    response = client.post(reverse("sharing-revoke", args=[link.code]), {"next": run_page})
    assert response.status_code == 302 and response["Location"] == run_page
    client.logout()
    page = client.get(paths(token)["page"])
    assert page.status_code == 410
    html = page.content.decode()
    assert "This share link was revoked" in html and "expired" not in html
    assert "revoked on" in client.get(paths(token)["status"]).json()["detail"]
    link.refresh_from_db()
    assert link.revoked_by == team["users"]["owner"] and link.state == "revoked"
    assert AuditEvent.objects.filter(
        kind=AuditEvent.Kind.CREDENTIAL_FORGOTTEN, detail__link=str(link.code)
    ).exists()
    # A second revocation keeps the first one's time; an offsite "next" is not followed.
    client.force_login(team["users"]["owner"])
    again = client.post(reverse("sharing-revoke", args=[link.code]), {"next": "https://evil.example/"})
    assert again["Location"] == reverse("sharing-list")
    assert ShareLink.objects.get(pk=link.pk).revoked_at == link.revoked_at


def test_who_may_create_and_revoke(client, team):
    run = team["runs"][0]
    create = f"{reverse('sharing-create')}?run={run.code}"
    client.force_login(team["users"]["viewer"])
    assert client.post(create, {"days": 5}).status_code == 403
    viewers_page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="share"' in viewers_page and 'id="share-form"' not in viewers_page
    client.force_login(team["users"]["outsider"])
    assert client.post(create, {"days": 5}).status_code == 404
    assert (
        client.get(f"{reverse('sharing-create')}?runs={run.code},{team['runs'][1].code}").status_code == 404
    )
    assert ShareLink.objects.count() == 0
    with pytest.raises(services.PermissionDenied):
        share(team, who="viewer")

    client.force_login(team["users"]["member"])
    created = client.post(create, {"days": 5, "note": "for the auditor"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    url = re.search(r'id="share-url" type="text" readonly value="([^"]+)"', created.content.decode()).group(1)
    assert url.startswith("http://testserver/s/")
    link = ShareLink.objects.get()
    assert link.created_by == team["users"]["member"] and link.note == "for the auditor"
    # Shown once: the run page lists the link (its views, a Revoke button), never the URL again.
    detail = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    token = url.rsplit("/s/", 1)[1].strip("/")
    assert (
        token not in detail
        and f'data-share="{link.code}"' in detail
        and f'data-revoke="{link.code}"' in detail
    )

    owners_link, _ = share(team, who="owner")
    assert client.post(reverse("sharing-revoke", args=[owners_link.code])).status_code == 403
    client.force_login(team["users"]["outsider"])
    assert client.post(reverse("sharing-revoke", args=[link.code])).status_code == 404
    client.force_login(team["users"]["member"])
    assert client.post(reverse("sharing-revoke", args=[link.code])).status_code == 302
    assert ShareLink.objects.get(pk=link.pk).revoked_by == team["users"]["member"]


def test_bad_input_is_a_clear_error(client, team, settings):
    settings.TOLLGATE_SHARE_MAX_DAYS = 90
    run = team["runs"][0]
    for kwargs, message in (
        ({"days": 0}, "at least 1"),
        ({"days": 91}, "at most 90"),
        ({"days": "7"}, "whole number"),
        ({"note": "n" * 201}, "at most 200"),
        ({"note": "two\nlines"}, "one line"),
    ):
        with pytest.raises(ValueError, match=message):
            services.create_share(team["users"]["owner"], run=run, **kwargs)
    other_project = Project.objects.create(name="elsewhere")
    Membership.objects.create(project=other_project, user=team["users"]["owner"], role=Role.OWNER)
    elsewhere = make_run(team["users"]["owner"], project=other_project, target_name="other")
    for runs, message in (
        ([run, elsewhere], "one project"),
        ([run], "2 to 10"),
        ([run, run], "twice"),
    ):
        with pytest.raises(ValueError, match=message):
            services.create_share(team["users"]["owner"], runs=runs)
    with pytest.raises(ValueError, match="either"):
        services.create_share(team["users"]["owner"], run=run, runs=team["runs"])
    # The default expiry never exceeds the operator's maximum.
    settings.TOLLGATE_SHARE_MAX_DAYS = 10
    link, _ = services.create_share(team["users"]["owner"], run=run)
    assert (link.expires_at - link.created).days in (9, 10)
    # The form shows field errors.
    client.force_login(team["users"]["owner"])
    page = client.post(f"{reverse('sharing-create')}?run={run.code}", {"days": 11, "note": "x" * 201})
    assert page.status_code == 200 and 'id="share-url"' not in page.content.decode()
    assert set(page.context["form"].errors) == {"days", "note"}
    garbage = client.post(f"{reverse('sharing-create')}?run={run.code}", {"days": "abc", "note": "a\x00b"})
    assert garbage.status_code == 200 and set(garbage.context["form"].errors) == {"days", "note"}
    for query in ("run=nope", "runs=x,y", "runs=", ""):
        assert client.get(f"{reverse('sharing-create')}?{query}").status_code == 404, query
    assert (
        client.post(reverse("sharing-revoke", args=["00000000-0000-0000-0000-000000000000"])).status_code
        == 404
    )
    assert ShareLink.objects.count() == 1


def test_status_json_answers_while_the_run_is_queued(client, team):
    run = make_run(team["users"]["member"], status=Run.Status.QUEUED, arms={}, project=team["project"])
    Run.objects.filter(pk=run.pk).update(started=None, finished=None)
    _, token = share(team, who="member", run=run)
    status = client.get(paths(token)["status"]).json()
    assert status["status"] == "queued" and status["terminal"] is False
    assert status["headline"] is None and status["budgets"] is None and status["finished"] is None
    page = client.get(paths(token)["page"])
    assert page.status_code == 200 and 'id="not-finished"' in page.content.decode()


def test_compare_share_from_the_compare_page(client, team):
    a, b = team["runs"]
    client.force_login(team["users"]["owner"])
    compare = client.get(f"{reverse('runs-compare')}?runs={b.code},{a.code}").content.decode()
    assert f'action="{reverse("sharing-create")}?runs={b.code},{a.code}"' in compare
    created = client.post(f"{reverse('sharing-create')}?runs={b.code},{a.code}", {"note": "before/after"})
    url = re.search(r'id="share-url" type="text" readonly value="([^"]+)"', created.content.decode()).group(1)
    token = url.rsplit("/s/", 1)[1].strip("/")
    link = ShareLink.objects.get()
    assert link.kind == "compare" and link.run is None and link.run_codes == [str(b.code), str(a.code)]
    client.logout()
    page = client.get(f"/s/{token}/")
    assert page.status_code == 200
    assert_shared_headers(page)
    html = page.content.decode()
    assert "Compare 2 runs" in html and 'id="compare-data"' in html and "before/after" in html
    assert "/runs/" not in html and "make this the reference" not in html
    data = client.get(f"/s/{token}/compare.json").json()
    assert data["costs"] and len(data["costs"][0]["cells"]) == 2
    # A compare link has no single report or status; a run link no compare.json.
    assert client.get(f"/s/{token}/report.json").status_code == 404
    assert client.get(f"/s/{token}/status.json").json()["detail"] == (
        "This share link shows a compare view: it has no status.json."
    )
    _, run_token = share(team)
    assert client.get(f"/s/{run_token}/compare.json").status_code == 404
    # A deleted run of the view: the link no longer opens.
    a.delete()
    assert client.get(f"/s/{token}/").status_code == 404


def test_project_list_shows_views_and_state(client, team):
    link, token = share(team, note="first")
    gone, _ = share(team, who="member", note="second")
    services.revoke(gone, team["users"]["member"])
    client.get(f"/s/{token}/")
    client.get(f"/s/{token}/status.json")
    client.force_login(team["users"]["owner"])
    session = client.session
    session["project"] = str(team["project"].code)
    session.save()
    html = client.get(reverse("sharing-list")).content.decode()
    row = re.search(rf'<tr data-share="{link.code}" data-state="active">.*?</tr>', html, re.S).group(0)
    assert "first" in row and "<td data-views>2</td>" in row and "never" not in row
    assert f'<tr data-share="{gone.code}" data-state="revoked">' in html
    # Someone else's project: not listed.
    client.force_login(team["users"]["outsider"])
    assert str(link.code) not in client.get(reverse("sharing-list")).content.decode()


def test_cli_create_list_and_revoke(team):
    from io import StringIO

    from django.core.management import CommandError, call_command

    run = team["runs"][0]
    out = StringIO()
    call_command(
        "tollgate",
        "share",
        "create",
        "--run",
        str(run.code),
        "--days",
        "3",
        "--note",
        "CI",
        "--json",
        stdout=out,
    )
    made = json.loads(out.getvalue())
    assert set(made) == {"url", "expires_at", "id"} and "/s/" in made["url"]
    link = ShareLink.objects.get(code=made["id"])
    assert link.created_by == run.owner and link.note == "CI"
    token = made["url"].rstrip("/").rsplit("/", 1)[1]
    assert link.token_hash == services.hash_token(token)
    with pytest.raises(CommandError, match="at most"):
        call_command("tollgate", "share", "create", "--run", str(run.code), "--days", "100000")
    with pytest.raises(CommandError, match="member role"):
        call_command("tollgate", "share", "create", "--run", str(run.code), "--user", "viewer")
    with pytest.raises(CommandError, match="no run"):
        call_command("tollgate", "share", "create", "--run", "nope")

    out = StringIO()
    call_command("tollgate", "share", "list", "--run", str(run.code), "--json", stdout=out)
    assert [row["id"] for row in json.loads(out.getvalue())] == [made["id"]]
    out = StringIO()
    call_command("tollgate", "share", "list", stdout=out)
    assert out.getvalue().startswith(f"{made['id']}  active ") and "views 0" in out.getvalue()
    # Revoke by URL (as the operator), then the second one by id as a user who may not.
    out = StringIO()
    call_command("tollgate", "share", "revoke", made["url"] + "status.json", stdout=out)
    assert "revoked" in out.getvalue() and ShareLink.objects.get(pk=link.pk).state == "revoked"
    second, _ = share(team)
    with pytest.raises(CommandError, match="creator or a project owner"):
        call_command("tollgate", "share", "revoke", str(second.code), "--user", "member")
    call_command("tollgate", "share", "revoke", str(second.code), "--user", "owner", stdout=StringIO())
    assert ShareLink.objects.get(pk=second.pk).revoked_by == team["users"]["owner"]
    with pytest.raises(CommandError, match="no such share link"):
        call_command("tollgate", "share", "revoke", "http://x/s/not-a-token/")


def test_a_frozen_run_is_shared_as_its_signed_report(client, team):
    run = team["runs"][0]
    frozen = freeze(run)
    _, token = share(team)
    report = client.get(paths(token)["json"]).json()
    assert report == frozen.report() and report["integrity"]["sha256"] == frozen.sha256
    html = client.get(paths(token)["page"]).content.decode()
    assert f'<code class="digest" id="integrity-sha256">{frozen.sha256}</code>' in html
    assert f'<code id="integrity-key">{frozen.key_id}</code>' in html
    assert 'href="/.well-known/tollgate-report-keys.json"' in html


def test_a_compare_link_gives_each_runs_signed_report(client, team):
    """An auditor with a compare link verifies every run in it: the page names each run's digest and
    key, and each run's frozen, signed JSON downloads under the link (nothing outside the link)."""
    a, b = team["runs"]
    frozen = freeze(a)  # b is not frozen: the page says so
    link, token = share(team, run=None, runs=[a, b])
    html = client.get(f"/s/{token}/").content.decode()
    assert f'<code class="digest">{frozen.sha256}</code>' in html and f"<code>{frozen.key_id}</code>" in html
    assert "not signed: the run has not ended" in html
    assert f'href="/s/{token}/reports/{a.code}.json?download=1"' in html
    answer = client.get(f"/s/{token}/reports/{a.code}.json?download=1")
    assert_shared_headers(answer)
    assert answer.json() == frozen.report()
    assert signing.verify(answer.json(), public_keys()) == []
    assert "attachment" in answer["Content-Disposition"]
    other = make_run(team["users"]["owner"], project=team["project"], target_name="shop")
    missing = client.get(f"/s/{token}/reports/{other.code}.json")
    assert missing.status_code == 404 and missing.json()["status"] == 404
    _, run_token = share(team)
    assert client.get(f"/s/{run_token}/reports/{a.code}.json").status_code == 404
    views = ShareView.objects.filter(link=link).values_list("what", flat=True)
    assert sorted(views) == ["page", "run report.json"]  # the 404 above is no view
    services.revoke(link, team["users"]["owner"])
    assert client.get(f"/s/{token}/reports/{a.code}.json").status_code == 410
