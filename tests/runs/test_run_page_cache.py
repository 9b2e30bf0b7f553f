"""The page of an ended run is kept rendered whole (portal/runs/runpage.py): a kept page is what
rendering it anew gives; it varies by reader (role, rights, the header's projects) and by everything
of the run that can change after it ended; access is checked in the database on every request; the
CSRF token and the share panel are filled in per request (docs/performance.md, "The portal under its
own load")."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from portal.projects.models import Membership, Project, Role, personal_project
from portal.runs import reporting, runpage
from portal.runs.models import Run
from portal.sharing import services as sharing
from portal.signing.services import freeze
from portal.targets.models import Target
from tests.runs.factories import make_run, open_attempt

pytestmark = pytest.mark.django_db
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
HEADERS = (
    "Content-Type",
    "Content-Security-Policy",
    "X-Frame-Options",
    "Permissions-Policy",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
    "X-Content-Type-Options",
    "Vary",
    "Cache-Control",
)


def ended(owner, **kwargs) -> Run:
    run = make_run(owner, seconds=6, **kwargs)
    reporting.store_summary(run)
    freeze(run)
    return Run.objects.get(pk=run.pk)


def reader(user, *, csrf_checks: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf_checks)
    client.force_login(user)
    return client


def member(run: Run, django_user_model, name: str, role: str):
    user = django_user_model.objects.create_user(name, password=f"{name}-pass-123")
    Membership.objects.create(project=run.project, user=user, role=role)
    return user


def html(client: Client, run: Run) -> str:
    response = client.get(reverse("runs-detail", args=[run.code]))
    assert response.status_code == 200
    return response.content.decode()


def kept_html(client: Client, run: Run) -> str:
    """The page, asserting it came from the kept page: the user and the page's one query, no more."""
    with CaptureQueriesContext(connection) as queries:
        page = html(client, run)
    assert len(queries) == 2, [q["sql"][:80] for q in queries]
    return page


def test_a_kept_page_is_what_rendering_it_anew_gives(owner):
    run = ended(owner)
    client = reader(owner)
    url = reverse("runs-detail", args=[run.code])
    rendered = client.get(url)  # rendered and kept
    with CaptureQueriesContext(connection) as queries:
        kept = client.get(url)
    assert len(queries) == 2  # the user and the page's query: the page itself was kept
    runpage.forget_all()
    fresh = client.get(url)  # rendered anew
    first, again, anew = (r.content.decode() for r in (rendered, kept, fresh))
    assert CSRF.sub("", first) == CSRF.sub("", again) == CSRF.sub("", anew)
    assert runpage.csrf_slot() not in again and runpage.panel_slot() not in again
    assert 'id="share-form"' in again and 'id="integrity"' in again and run.frozen_report.sha256 in again
    # The same headers (CSP and the other security headers come from the middleware either way).
    for name in HEADERS:
        assert rendered.headers.get(name) == kept.headers.get(name) == fresh.headers.get(name), name
    assert "default-src 'self'" in kept.headers["Content-Security-Policy"]


def test_each_reader_sees_the_controls_of_their_role_from_the_kept_page(owner, django_user_model):
    run = ended(owner)
    viewer = member(run, django_user_model, "viewer-one", Role.VIEWER)
    colleague = member(run, django_user_model, "member-one", Role.MEMBER)
    pages = {}
    for user in (owner, viewer, colleague):
        client = reader(user)
        html(client, run)
        pages[user.username] = kept_html(client, run)
    as_owner, as_viewer, as_member = pages["owner"], pages["viewer-one"], pages["member-one"]
    assert "Log out owner" in as_owner and "Log out viewer-one" in as_viewer
    assert 'id="pin-baseline"' in as_owner and 'id="pin-baseline"' in as_member
    assert 'id="pin-baseline"' not in as_viewer
    assert 'id="delete-link"' in as_owner and 'id="delete-link"' not in as_member  # not their run
    assert 'id="share-form"' in as_member and "Sharing needs the member role" in as_viewer


def test_a_removed_member_and_an_outsider_get_404_at_once(owner, outsider, django_user_model):
    run = ended(owner)
    viewer = member(run, django_user_model, "viewer-two", Role.VIEWER)
    client = reader(viewer)
    html(client, run)
    kept_html(client, run)
    Membership.objects.filter(user=viewer, project=run.project).delete()
    assert client.get(reverse("runs-detail", args=[run.code])).status_code == 404
    assert reader(outsider).get(reverse("runs-detail", args=[run.code])).status_code == 404


def test_a_demoted_member_loses_the_controls_at_once(owner, django_user_model):
    run = ended(owner)
    colleague = member(run, django_user_model, "member-two", Role.MEMBER)
    client = reader(colleague)
    assert 'id="pin-baseline"' in html(client, run) and 'id="pin-baseline"' in html(client, run)
    Membership.objects.filter(user=colleague).update(role=Role.VIEWER)
    assert 'id="pin-baseline"' not in html(client, run)


def test_the_csrf_token_of_a_kept_page_is_valid_for_the_next_post(owner):
    run = ended(owner)
    client = reader(owner, csrf_checks=True)
    html(client, run)
    kept = kept_html(client, run)
    tokens = set(CSRF.findall(kept))
    assert len(tokens) == 1  # one masked token, in every form of the page
    response = client.post(
        reverse("runs-pin-baseline", args=[run.code]), {"csrfmiddlewaretoken": tokens.pop()}
    )
    assert response.status_code == 302
    # The pin shows at once, with its message; the page after is kept again, without it.
    pinned = html(client, run)
    assert (
        "Pinned as the baseline" in pinned and "baseline of " in pinned and 'id="pin-baseline"' not in pinned
    )
    html(client, run)
    again = kept_html(client, run)
    assert "Pinned as the baseline" not in again and "baseline of " in again


def test_what_changes_after_the_end_shows_at_once(owner):
    run = ended(owner, target_name="shop")
    client = reader(owner)
    html(client, run)
    assert "<h1>shop " in html(client, run)
    Target.objects.filter(pk=run.target_id).update(name="store")
    assert "<h1>store " in html(client, run)
    other = ended(owner, target_name="store")  # another target of that name: labels tell them apart
    assert "<h1>store (" in html(client, run) and "<h1>store (" in html(client, other)


def test_share_links_and_their_views_show_at_once_and_a_revoked_link_stops(owner):
    run = ended(owner)
    client = reader(owner)
    html(client, run)
    assert "No share links of this run yet" in html(client, run)
    link, token = sharing.create_share(owner, run=run, note="for the auditor")
    shown = html(client, run)
    assert f'data-share="{link.code}"' in shown and "for the auditor" in shown
    assert Client().get(reverse("sharing-view", args=[token])).status_code == 200
    views = re.search(rf'data-share="{link.code}".*?<td data-views>(\d+)</td>', html(client, run), re.S)
    assert views.group(1) == "1"
    sharing.revoke(link, owner)
    assert Client().get(reverse("sharing-view", args=[token])).status_code in (404, 410)
    assert re.search(rf'data-share="{link.code}" data-state="revoked"', html(client, run))


def test_another_host_gets_its_own_page(owner):
    run = ended(owner)
    client = reader(owner)
    url = reverse("runs-detail", args=[run.code])
    keys = reverse("signing-keys")
    for host in ("localhost", "127.0.0.1", "localhost"):
        assert f"http://{host}{keys}</a>" in client.get(url, HTTP_HOST=host).content.decode()


def test_a_run_still_going_is_rendered_anew(owner):
    run = make_run(owner, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(finished=None)
    client = reader(owner)
    assert 'id="run-bar"' in html(client, run)
    open_attempt(run, current_arm="tls")
    found = runpage.probe(client.get(reverse("runs-detail", args=[run.code])).wsgi_request, run.code)
    assert not found.terminal and runpage.page_key(None, found) is None


def test_the_page_query_is_prepared_once_per_connection(owner):
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")
    run = ended(owner)
    client = reader(owner)
    for _ in range(3):
        html(client, run)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%l.revoked_by_id%"]
        )
        assert cursor.fetchone()[0] == 1


def test_the_header_of_a_kept_page_follows_the_project_switcher(owner):
    run = ended(owner)
    other = Project.objects.create(name="another project")
    Membership.objects.create(project=other, user=owner, role=Role.VIEWER)
    client = reader(owner)
    html(client, run)
    personal = personal_project(owner)
    assert f'<option value="{personal.code}" selected>' in html(client, run)
    client.post(reverse("projects-switch"), {"project": str(other.code)})
    switched = html(client, run)
    assert f'<option value="{other.code}" selected>' in switched
    assert f'<option value="{personal.code}" selected>' not in switched


def test_without_prepared_statements_the_page_is_the_same(owner, settings):
    run = ended(owner)
    client = reader(owner)
    prepared = html(client, run)
    runpage.forget_all()
    settings.TOLLGATE_PREPARED_STATEMENTS = False  # behind a pooler that cannot keep them
    plain = html(client, run)
    assert CSRF.sub("", prepared) == CSRF.sub("", plain)
    assert CSRF.sub("", kept_html(client, run)) == CSRF.sub("", plain)
