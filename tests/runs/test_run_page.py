"""The page of an ended run is its stored report section (portal/runs/pages.py, rendered once when
the run ends and stored beside its report) with what varies per reader and what can change after the
run ended around it: the header, the controls of the reader's role, the baseline pin, the target's
label, the scenario, the integrity block, the share panel with its links. Access and all that are
read through the ORM on every request, and the page is kept rendered by them
(portal/runs/runpage.py): whatever changes shows at once. A section stored under another key (before
sections were stored, another template or report version) is rendered again and stored
(docs/performance.md, "The portal under its own load")."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from portal.projects.models import Membership, Project, Role, personal_project
from portal.runs import pages, reporting, runpage
from portal.runs.models import Run, RunReport
from portal.scenarios.models import Scenario
from portal.sharing import services as sharing
from portal.sharing.models import ShareLink
from portal.signing.services import freeze
from portal.targets.models import Target
from tests.runs.factories import make_run

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
PROBE_ERROR = {"errors": ["ssh: connection refused"]}


def ended(owner, **kwargs) -> Run:
    """A finished run as the worker leaves it: report and section stored with its summary, frozen."""
    run = make_run(owner, seconds=6, **kwargs)
    reporting.store_summary(run)
    pages.store_after_end(run)
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


def stored(run: Run) -> RunReport:
    return RunReport.objects.get(run=run)


def fresh_section(run: Run, label: str) -> str:
    """The section rendered now with this page's live values, from nothing stored in the page's way."""
    json_url = reverse("runs-report-json", args=[run.code]) + "?download=1"
    live = pages.live_values(run, shared=False, target_label=label, json_download_url=json_url)
    return pages.render_section(run, live)[0]


def test_the_section_is_stored_when_the_run_ends_and_is_what_rendering_it_anew_gives(owner):
    run = ended(owner, probes=PROBE_ERROR)
    row = stored(run)
    assert row.section_key == pages.section_key(run) and row.section_key.startswith(row.key)
    assert "<!--slot:json_download_url:-->" in row.section and 'id="arm-table"' in row.section
    assert row.section_evidence["badge"]["level"] in ("ok", "warn", "bad")
    client = reader(owner)
    url = reverse("runs-detail", args=[run.code])
    first, second = client.get(url), client.get(url)
    runpage.forget_all()  # a web process that never kept it: from the stored row
    third = client.get(url)
    served = [CSRF.sub("", r.content.decode()) for r in (first, second, third)]
    assert served[0] == served[1] == served[2]
    assert fresh_section(run, run.target.name) in first.content.decode()
    assert "<!--slot:" not in first.content.decode()
    assert f"Check the SSH access of {run.target.name}" in first.content.decode()
    assert 'id="share-form"' in first.content.decode() and 'id="integrity"' in first.content.decode()
    assert run.frozen_report.sha256 in first.content.decode()
    for name in HEADERS:
        assert first.headers.get(name) == third.headers.get(name), name
    assert "default-src 'self'" in first.headers["Content-Security-Policy"]


def test_a_view_reads_two_small_rows_and_a_rendering_reads_the_state_again(
    owner, django_user_model, django_assert_num_queries
):
    run = ended(owner)
    client = reader(owner)
    url = reverse("runs-detail", args=[run.code])
    client.get(url)
    # The user (the session and the header's projects come from the cache); the run's page state
    # with the reader's role, how many of the reader's targets have its target's name, and its share
    # links. The page is kept rendered by them (portal/runs/runpage.py).
    with django_assert_num_queries(2):
        assert client.get(url).status_code == 200
    # Another of the reader's targets has the name: + those targets, whose URLs tell them apart (its
    # label); another run is the baseline: the same reads.
    Target.objects.create(project=run.project, name=run.target.name, plain_url="http://127.0.0.1:9/x")
    Target.objects.filter(pk=run.target_id).update(baseline=ended(owner))
    client.get(url)
    with django_assert_num_queries(3):
        assert client.get(url).status_code == 200
    # Another web process renders the page: + the run with its target, scenario and signature, the
    # baseline's code, the stored section's row (by its run and key), the share links with their
    # makers, then the page's state again (2: kept only if nothing changed while it rendered).
    runpage.forget_all()
    with django_assert_num_queries(3 + 4 + 2):
        assert client.get(url).status_code == 200


def test_no_query_reads_the_stored_report_or_the_signed_body(owner):
    run = ended(owner)
    client = reader(owner)
    html(client, run)
    with CaptureQueriesContext(connection) as queries:
        html(client, run)
    sql = " ".join(q["sql"] for q in queries)
    assert '"body"' not in sql and '"page"' not in sql and '"section"' not in sql
    assert '"probes"' not in sql and '"tls_info"' not in sql  # the section shows them, stored


def test_each_reader_sees_the_controls_of_their_role(owner, django_user_model):
    run = ended(owner)
    viewer = member(run, django_user_model, "viewer-one", Role.VIEWER)
    colleague = member(run, django_user_model, "member-one", Role.MEMBER)
    pages = {}
    for user in (owner, viewer, colleague):
        client = reader(user)
        html(client, run)
        pages[user.username] = html(client, run)
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


def test_the_csrf_token_of_the_page_is_valid_for_the_next_post(owner):
    run = ended(owner)
    client = reader(owner, csrf_checks=True)
    html(client, run)
    page = html(client, run)
    tokens = set(CSRF.findall(page))
    assert len(tokens) == 1  # one masked token, in every form of the page
    response = client.post(
        reverse("runs-pin-baseline", args=[run.code]), {"csrfmiddlewaretoken": tokens.pop()}
    )
    assert response.status_code == 302
    # The pin shows at once, with its message; the page after shows the pin without it.
    pinned = html(client, run)
    assert (
        "Pinned as the baseline" in pinned and "baseline of " in pinned and 'id="pin-baseline"' not in pinned
    )
    again = html(client, run)
    assert "Pinned as the baseline" not in again and "baseline of " in again


def test_the_baseline_shows_at_once_on_the_other_runs(owner):
    baseline, run = ended(owner), ended(owner)
    client = reader(owner)
    assert "Compare with the baseline" not in html(client, run)
    Target.objects.filter(pk=run.target_id).update(baseline=baseline)
    assert f"?runs={baseline.code},{run.code}" in html(client, run)
    Target.objects.filter(pk=run.target_id).update(baseline=None)
    assert "Compare with the baseline" not in html(client, run)


def test_what_changes_after_the_end_shows_at_once(owner):
    run = ended(owner, target_name="shop", probes=PROBE_ERROR)
    client = reader(owner)
    html(client, run)
    assert "<h1>shop " in html(client, run)
    Target.objects.filter(pk=run.target_id).update(name="store")
    page = html(client, run)
    assert "<h1>store " in page and "Check the SSH access of store<" in page  # inside the section too
    other = ended(owner, target_name="store")  # another target of that name: labels tell them apart
    page = html(client, run)
    assert "<h1>store (" in page and "<h1>store (" in html(client, other)
    assert re.search(r"Check the SSH access of store \(", page)
    scenario = Scenario.objects.create(project=run.project, target=run.target, name="nightly")
    Run.objects.filter(pk=run.pk).update(scenario=scenario, scenario_version=3)
    assert "nightly version 3" in html(client, run)
    Scenario.objects.filter(pk=scenario.pk).update(name="weekly")
    assert "weekly version 3" in html(client, run)
    scenario.delete()
    assert "<dt>Scenario</dt><dd>ad hoc · " in html(client, run)


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


def test_a_view_of_a_share_link_shows_at_once_without_rendering_the_page_again(
    owner, monkeypatch, django_assert_num_queries
):
    run = ended(owner)
    link, token = sharing.create_share(owner, run=run, note="for the auditor")
    client = reader(owner)
    html(client, run)
    row = rf'data-share="{link.code}".*?<td data-views>(\d+)</td>\s*<td>([^<]*)</td>'
    assert re.search(row, html(client, run), re.S).groups() == ("0", "never")
    for views in (1, 2):
        assert Client().get(reverse("sharing-view", args=[token])).status_code == 200
        last = ShareLink.objects.get(pk=link.pk).last_viewed_at
        with django_assert_num_queries(2):  # the kept page, its views filled in: nothing rendered
            page = html(client, run)
        assert re.search(row, page, re.S).groups() == (str(views), f"{last:%Y-%m-%d %H:%M:%S}")
    # What the links table shows when the page is not kept (rendered without slots): the same page.
    monkeypatch.setattr(runpage, "page_key", lambda request, found: None)
    assert CSRF.sub("", html(client, run)) == CSRF.sub("", page)


def test_the_shared_page_serves_the_same_section_without_the_portal_links_or_the_token_stored(owner):
    run = ended(owner, probes=PROBE_ERROR)
    _, token = sharing.create_share(owner, run=run)
    page = Client().get(reverse("sharing-view", args=[token]))
    assert page.status_code == 200
    shared = page.content.decode()
    assert reverse("sharing-report-json", args=[token]) + "?download=1" in shared
    assert "ssh: connection refused" in shared and "SSH access" not in shared and "<!--slot:" not in shared
    assert token not in stored(run).section  # the credential stays hashed only
    assert 'id="arm-table"' in shared and run.frozen_report.sha256 in shared


def test_another_host_gets_its_own_page(owner):
    run = ended(owner)
    client = reader(owner)
    url = reverse("runs-detail", args=[run.code])
    keys = reverse("signing-keys")
    for host in ("localhost", "127.0.0.1", "localhost"):
        assert f"http://{host}{keys}</a>" in client.get(url, HTTP_HOST=host).content.decode()


def test_a_run_still_going_is_rendered_anew_and_never_stored(owner):
    run = make_run(owner, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(finished=None)
    run.refresh_from_db()
    assert pages.section_key(run) is None
    client = reader(owner)
    page = html(client, run)
    assert 'id="run-bar"' in page and 'id="arm-table"' in page and "<!--slot:" not in page
    assert not RunReport.objects.filter(run=run).exclude(section="").exists()


def test_a_report_stored_before_sections_renders_on_its_first_view_and_is_stored(owner):
    run = ended(owner)
    client = reader(owner)
    before = CSRF.sub("", html(client, run))
    RunReport.objects.filter(run=run).update(section="", section_key="", section_evidence=None)
    runpage.forget_all()  # a web process that never kept the page
    assert CSRF.sub("", html(client, run)) == before
    assert stored(run).section_key == pages.section_key(run) and stored(run).section


def test_a_section_of_another_template_or_report_version_is_rendered_again(owner, monkeypatch):
    run = ended(owner)
    client = reader(owner)
    html(client, run)
    # A release that changed the section's templates or code: another digest, another key.
    RunReport.objects.filter(run=run).update(section="<p>stale section</p>", section_key="another release")
    runpage.forget_all()
    assert "stale section" not in html(client, run)
    assert stored(run).section_key == pages.section_key(run)
    # A release that changed the report (REPORT_CACHE_VERSION): the report is computed again and its
    # section with it.
    old_key = stored(run).section_key
    monkeypatch.setattr(reporting, "REPORT_CACHE_VERSION", reporting.REPORT_CACHE_VERSION + "-next")
    page = html(client, run)
    row = stored(run)
    assert row.key.startswith(f"report:{reporting.REPORT_CACHE_VERSION}:")
    assert row.section_key != old_key and row.section_key == pages.section_key(run)
    assert 'id="arm-table"' in page


def test_the_header_follows_the_project_switcher(owner):
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


def test_a_link_that_expires_by_time_shows_expired_at_once(owner, monkeypatch):
    run = ended(owner)
    link, _ = sharing.create_share(owner, run=run)
    client = reader(owner)
    html(client, run)
    assert re.search(rf'data-share="{link.code}" data-state="active"', html(client, run))
    later = link.expires_at + timedelta(seconds=1)  # nothing changed in the database, only the time
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert re.search(rf'data-share="{link.code}" data-state="expired"', html(client, run))
