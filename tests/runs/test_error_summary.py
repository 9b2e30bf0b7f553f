"""Forms refused with errors open with a summary of them (templates/_error_summary.html): every
error listed, each field's a link to the field's own id, the summary focusable (the page's script
focuses it: tests/e2e/test_usable_pages.py); a form without errors has none."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs import starting
from tests.runs.factories import VALID_FORM
from tests.scenarios.conftest import SCENARIO_DATA
from tests.scenarios.test_views import edit_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario(owner):
    return starting.save_scenario(personal_project(owner), "ci smoke", dict(SCENARIO_DATA))


def summary(page: str) -> list[tuple[str, str]]:
    """(href, text) of the summary's items, in order; [] without a summary."""
    found = re.search(
        r'<div class="error-summary" id="error-summary" tabindex="-1"[^>]*>(.*?)</div>', page, re.S
    )
    if found is None:
        return []
    items = re.findall(r"<li>(?:<a href=\"([^\"]+)\">)?(.*?)(?:</a>)?</li>", found.group(1), re.S)
    return [(href, unescape(text)) for href, text in items]


def ids(page: str) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page))


def test_the_run_form_lists_its_errors_at_the_top_linked_to_their_fields(client, owner):
    client.force_login(owner)
    page = client.get(reverse("runs-new")).content.decode()
    assert summary(page) == [] and "error_summary.js" not in page
    page = client.post(reverse("runs-new"), {**VALID_FORM, "users": "0", "arms": []}).content.decode()
    items = summary(page)
    assert ("#id_users", "Virtual users: Ensure this value is greater than or equal to 1.") in items
    assert ("#id_arms", "Arms: This field is required.") in items
    assert {href[1:] for href, _ in items if href} <= ids(page)  # every link has its field
    assert page.index('id="error-summary"') < page.index(
        '<form method="post" class="card run-form"'
    )  # above the form, at the top
    assert "2 problems to fix" in page and "/static/js/error_summary.js" in page
    # The form's own errors (not of one field) are listed too, without a link.
    page = client.post(reverse("runs-new"), {**VALID_FORM, "scenario": "not-a-scenario"}).content.decode()
    assert ("", "The saved scenario was not found (deleted, or not yours): start again.") in summary(page)


def test_the_scenario_form_lists_the_errors_of_both_its_parts(client, owner, scenario):
    client.force_login(owner)
    data = edit_data(scenario, users=0, budget_handshake_ms="-1", name="")
    page = client.post(reverse("scenarios-edit", args=[scenario.code]), data).content.decode()
    hrefs = [href for href, _ in summary(page)]
    assert {"#id_name", "#id_users", "#id_budget_handshake_ms"} <= set(hrefs)
    assert {href[1:] for href in hrefs if href} <= ids(page)


def test_the_target_forms_list_their_errors(client, owner):
    client.force_login(owner)
    page = client.post(reverse("targets-list"), {"name": "", "plain_url": "ftp://x/"}).content.decode()
    assert [href for href, _ in summary(page)] == ["#id_name", "#id_plain_url"]
