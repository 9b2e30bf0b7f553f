"""The report section of an ended run is rendered once and served from the cache, byte for byte what
rendering it anew gives; what varies per reader is rendered around it on every request; the report
and compare pages read a fixed, small number of rows (portal/runs/fragments.py,
docs/performance.md "The portal under its own load")."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from portal.projects.models import Membership, Role, personal_project
from portal.runs import fragments, pages, reporting
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.sharing import services as sharing
from portal.signing.services import freeze
from portal.targets.models import Target
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"')


def ended(owner, **kwargs) -> Run:
    """A finished run as the worker leaves it: report stored with its summary, report frozen."""
    run = make_run(owner, seconds=6, **kwargs)
    reporting.store_summary(run)
    freeze(run)
    return Run.objects.get(pk=run.pk)


def fresh_section(run: Run, request, *, shared: bool, json_url: str, label: str) -> str:
    """The section rendered now, without any cache: what the page showed before it was cached."""
    ctx = pages.report_context(run, request)
    ctx |= {"run": run, "shared": shared, "json_download_url": json_url, "target_label": label}
    return render_to_string("runs/_report.html", ctx, request)


def keys_of(run: Run) -> list[str]:
    return [key for key in cache._cache.get_client().scan_iter(f"*report-html:*{run.code}*")]  # noqa: SLF001


def test_the_cached_section_is_what_rendering_it_anew_gives(client, owner):
    run = ended(owner)
    client.force_login(owner)
    url = reverse("runs-detail", args=[run.code])
    first = client.get(url)  # renders and stores the section
    assert keys_of(run), "the section of an ended run is kept"
    second = client.get(url)  # from the cache
    assert first.status_code == second.status_code == 200
    # Only the CSRF tokens differ between two renderings of a page (Django masks them afresh).
    assert CSRF.sub("", first.content.decode()) == CSRF.sub("", second.content.decode())
    json_url = reverse("runs-report-json", args=[run.code]) + "?download=1"
    expected = fresh_section(run, second.wsgi_request, shared=False, json_url=json_url, label=run.target.name)
    assert expected in second.content.decode()
    assert 'id="integrity"' in second.content.decode() and run.frozen_report.sha256 in second.content.decode()


def test_the_per_reader_parts_are_rendered_on_every_request(client, owner, django_user_model):
    run = ended(owner)
    viewer = django_user_model.objects.create_user("viewer-one")
    Membership.objects.create(project=run.project, user=viewer, role=Role.VIEWER)
    url = reverse("runs-detail", args=[run.code])
    client.force_login(owner)
    as_owner = client.get(url).content.decode()
    other = Client()
    other.force_login(viewer)
    as_viewer = other.get(url).content.decode()
    assert "Log out owner" in as_owner and "Log out viewer-one" in as_viewer
    assert 'id="pin-baseline"' in as_owner and 'id="pin-baseline"' not in as_viewer
    assert 'id="share-form"' in as_owner and "Sharing needs the member role" in as_viewer
    # A link made after the section was cached shows at once, with its view count.
    link, _ = sharing.create_share(owner, run=run, note="after the cache")
    assert f'data-share="{link.code}"' in client.get(url).content.decode()


def test_a_renamed_scenario_and_a_new_label_render_anew(client, owner):
    project = personal_project(owner)
    run = ended(owner)
    scenario = Scenario.objects.create(project=project, target=run.target, name="nightly")
    Run.objects.filter(pk=run.pk).update(scenario=scenario, scenario_version=1)
    client.force_login(owner)
    url = reverse("runs-detail", args=[run.code])
    assert "nightly version 1" in client.get(url).content.decode()
    Scenario.objects.filter(pk=scenario.pk).update(name="weekly")
    assert "weekly version 1" in client.get(url).content.decode()
    # Another target of the same name: the label tells them apart, inside the section too.
    Target.objects.create(project=project, name=run.target.name, plain_url="http://127.0.0.1:9/other")
    label = pages_label(client.get(url).content.decode())
    assert label != run.target.name and label.startswith(run.target.name)


def pages_label(html: str) -> str:
    return re.search(r"<h1>(.*?) <span", html).group(1)


def test_a_run_still_going_is_never_kept(client, owner):
    run = make_run(owner, status=Run.Status.RUNNING)
    Run.objects.filter(pk=run.pk).update(finished=None)
    run.refresh_from_db()
    assert fragments.cache_key(run, {}) is None
    client.force_login(owner)
    assert client.get(reverse("runs-detail", args=[run.code])).status_code == 200
    assert keys_of(run) == []


def test_the_shared_page_puts_its_token_in_after_the_cache(owner):
    run = ended(owner)
    _, token = sharing.create_share(owner, run=run)
    page = Client().get(reverse("sharing-view", args=[token]))
    assert page.status_code == 200
    html = page.content.decode()
    assert reverse("sharing-report-json", args=[token]) + "?download=1" in html
    assert fragments.JSON_URL_SLOT not in html
    kept = [cache.get(key.decode().split(":", 2)[-1]) for key in keys_of(run)]
    assert kept and all(token not in str(value) for value in kept)  # the credential stays hashed only
    again = Client().get(reverse("sharing-view", args=[token])).content.decode()
    assert again == html


def test_a_report_view_reads_two_rows_once_its_page_is_kept(client, owner, django_assert_num_queries):
    run = ended(owner)
    client.force_login(owner)
    url = reverse("runs-detail", args=[run.code])
    client.get(url)
    # The user; the run with the reader's role, what of the page can change and the share links, in
    # one query (portal/runs/runpage.py); the session and the header's projects come from the cache.
    with django_assert_num_queries(2):
        assert client.get(url).status_code == 200


def test_a_compare_of_five_reads_a_fixed_number_of_rows(client, owner, django_assert_num_queries):
    runs = [ended(owner) for _ in range(5)]
    client.force_login(owner)
    url = reverse("runs-compare") + "?runs=" + ",".join(str(run.code) for run in runs)
    client.get(url)
    # The user, the 5 runs, the target labels, the role for the share panel: the compare body and the
    # header's projects come from the cache, whatever the number of runs.
    with django_assert_num_queries(4):
        assert client.get(url).status_code == 200


def test_the_cached_compare_body_is_what_rendering_it_anew_gives(client, owner):
    runs = [ended(owner) for _ in range(3)]
    codes = [str(run.code) for run in runs]
    client.force_login(owner)
    url = reverse("runs-compare") + "?runs=" + ",".join(codes)
    first, second = client.get(url), client.get(url)
    assert CSRF.sub("", first.content.decode()) == CSRF.sub("", second.content.decode())
    ctx = pages.compare_context(runs, second.wsgi_request)
    ctx |= {
        "target_labels": {run.target.code: run.target.name for run in runs},
        "as_reference": [",".join([code] + [c for c in codes if c != code]) for code in codes],
    }
    assert render_to_string("runs/_compare_body.html", ctx, second.wsgi_request) in second.content.decode()
    # The JSON form is computed, never the cached page.
    data = client.get(url + "&format=json").json()
    assert [run["id"] for run in data["runs"]] == codes
