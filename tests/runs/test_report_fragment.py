"""The report section of an ended run is rendered once and stored, and the compare body of ended runs
once and served from the cache, byte for byte what rendering them anew gives; what varies per reader
is rendered around them on every request; the compare page reads a fixed, small number of rows
(portal/runs/pages.py, docs/performance.md "The portal under its own load"; the run page's own
tests are tests/runs/test_run_page.py)."""

from __future__ import annotations

import re

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.urls import reverse

from portal.projects.models import Membership, Role, personal_project
from portal.runs import pages, reporting
from portal.runs.models import Run, RunReport
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


def test_the_shared_page_puts_its_token_in_after_the_store(owner):
    run = ended(owner)
    _, token = sharing.create_share(owner, run=run)
    page = Client().get(reverse("sharing-view", args=[token]))
    assert page.status_code == 200
    html = page.content.decode()
    assert reverse("sharing-report-json", args=[token]) + "?download=1" in html
    assert "<!--slot:" not in html
    assert token not in RunReport.objects.get(run=run).section  # the credential stays hashed only
    again = Client().get(reverse("sharing-view", args=[token])).content.decode()
    assert again == html


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
