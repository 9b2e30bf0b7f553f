"""portal/compiled.py: a queryset whose SQL Django made once, run again with other values, gives what
the queryset itself gives, for each value, and is not made again."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connections
from django.db.models import F

from portal.compiled import Compiled
from portal.projects.models import Membership, Project, Role
from portal.targets.models import Target

pytestmark = pytest.mark.django_db


def _targets(code, user_id):
    found = Target.objects.filter(project__code=code, project__memberships__user=user_id)
    return found.values("code", "name", "project__name").annotate(role=F("project__memberships__role"))


TARGETS = Compiled(_targets, code=Project._meta.get_field("code"), user_id=Membership._meta.get_field("user"))


@pytest.fixture
def world(django_user_model):
    users = [django_user_model.objects.create_user(f"reader-{i}") for i in range(2)]
    projects = [Project.objects.create(name=f"project {i}") for i in range(2)]
    Membership.objects.create(project=projects[0], user=users[0], role=Role.OWNER)
    Membership.objects.create(project=projects[1], user=users[0], role=Role.VIEWER)
    Membership.objects.create(project=projects[1], user=users[1], role=Role.MEMBER)
    for i, project in enumerate(projects):
        for j in range(i + 1):
            Target.objects.create(project=project, name=f"t{i}{j}", plain_url=f"http://127.0.0.1:{9000 + j}/")
    return users, projects


def _sorted(rows):
    return sorted(rows, key=lambda row: row["name"])


def test_the_rows_are_the_querysets_for_every_value(world):
    users, projects = world
    seen = 0
    for user in users:
        for project in projects:
            expected = _sorted(_targets(project.code, user.pk))
            assert _sorted(TARGETS.rows(code=project.code, user_id=user.pk)) == expected
            assert _sorted(TARGETS.rows(code=str(project.code), user_id=str(user.pk))) == expected
            seen += len(expected)
    assert (
        seen == 1 + 2 + 2
    )  # the owner's 1, the viewer's 2, the member's 2; user 1 sees nothing of project 0
    assert TARGETS.rows(code=uuid.uuid4(), user_id=users[0].pk) == []


def test_model_instances_are_djangos(world):
    users, _ = world
    by_pk = Compiled(lambda pk: get_user_model().objects.filter(pk=pk), pk=get_user_model()._meta.pk)
    for user in users:
        (found,) = by_pk.objects(pk=user.pk)
        assert found == user and found.username == user.username and found.password == user.password
        assert not found._state.adding and found._state.db == "default"
    assert by_pk.objects(pk=10**6) == []


def test_its_sql_is_made_once_and_every_thread_runs_it(world):
    users, projects = world
    built = []

    def counted(code, user_id):
        built.append(1)
        return _targets(code, user_id)

    compiled = Compiled(
        counted, code=Project._meta.get_field("code"), user_id=Membership._meta.get_field("user")
    )
    expected = _sorted(_targets(projects[1].code, users[1].pk))
    for _ in range(3):
        assert _sorted(compiled.rows(code=projects[1].code, user_id=users[1].pk)) == expected
    assert len(built) == 1
    found = []

    def elsewhere():
        # Its own connection, outside the test's transaction: it sees none of the test's rows.
        found.append(compiled.rows(code=projects[1].code, user_id=users[1].pk))
        connections.close_all()

    other = threading.Thread(target=elsewhere)
    other.start()
    other.join()
    assert found == [[]] and len(built) == 1  # the same SQL, on the other thread's connection


def test_a_value_the_query_does_not_use_and_a_malformed_one_are_refused(world):
    users, projects = world
    unused = Compiled(lambda code, user_id: _targets(code, 1), code=Project._meta.get_field("code"))
    unused.fields["user_id"] = Membership._meta.get_field("user")
    with pytest.raises(ValueError, match="user_id"):
        unused.rows(code=projects[0].code, user_id=users[0].pk)
    with pytest.raises(ValidationError):
        TARGETS.rows(code="not a uuid", user_id=users[0].pk)
