"""The header's project switcher comes from the cache, and shows every change of a membership or a
project at once (portal/projects/switcher.py)."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from portal.projects import switcher
from portal.projects.models import Membership, Project, Role, personal_project

pytestmark = pytest.mark.django_db
OPTION = re.compile(r'<option value="[^"]+"( selected)?>([^<]+)</option>')


def options(client) -> list[tuple[bool, str]]:
    html = client.get(reverse("runs-list")).content.decode()
    html = re.search(r'<select name="project" id="switch-project">(.*?)</select>', html, re.S).group(1)
    return [(bool(selected), text) for selected, text in OPTION.findall(html)]


def test_the_switcher_follows_every_change_of_memberships_and_projects(client, owner, django_user_model):
    personal_project(owner)
    client.force_login(owner)
    assert options(client) == [(True, "owner (owner)")]
    other = django_user_model.objects.create_user("someone")
    team = Project.objects.create(name="alpha-team")
    Membership.objects.create(project=team, user=other, role=Role.OWNER)
    membership = Membership.objects.create(project=team, user=owner, role=Role.VIEWER)
    assert options(client) == [(False, "alpha-team (viewer)"), (True, "owner (owner)")]
    membership.role = Role.MEMBER
    membership.save()
    assert options(client) == [(False, "alpha-team (member)"), (True, "owner (owner)")]
    team.name = "zulu-team"
    team.save()
    assert options(client) == [(True, "owner (owner)"), (False, "zulu-team (member)")]
    membership.delete()
    assert options(client) == [(True, "owner (owner)")]


def test_a_page_read_of_the_switcher_costs_no_query_once_cached(owner, django_assert_num_queries):
    personal_project(owner)
    switcher.rows_for(owner)
    with django_assert_num_queries(0):
        rows = switcher.rows_for(owner)
    assert [(row.project.name, row.role) for row in rows] == [("owner", "owner")]


def test_rows_of_an_account_of_the_same_id_elsewhere_are_not_taken(owner):
    personal_project(owner)
    key = switcher._key(owner.pk)  # noqa: SLF001 - plant what another database's account left
    cache.set(key, ("2001-01-01T00:00:00+00:00", [("x", "someone else's", "owner", None)]))
    assert [row.project.name for row in switcher.rows_for(owner)] == ["owner"]
