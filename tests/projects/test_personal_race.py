"""A new user's first pages, in parallel (several tabs, or a load test's users on one account), make
the personal project once: the losers of the race read the winner's, none answers 500."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from portal.projects.models import Membership, Project, personal_project

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = 4
USERS = 12


def _race(user) -> list:
    barrier = threading.Barrier(THREADS)
    found: list = []

    def first_page() -> None:
        try:
            barrier.wait()
            found.append(personal_project(user).pk)
        except Exception as exc:  # noqa: BLE001 - the test reports what a thread raised
            found.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=first_page) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return found


def test_concurrent_first_requests_make_one_personal_project(django_user_model):
    for n in range(USERS):
        user = django_user_model.objects.create_user(f"racer{n}")
        found = _race(user)
        assert not [f for f in found if isinstance(f, Exception)], found
        assert len(set(found)) == 1, found
        assert Project.objects.filter(personal_of=user).count() == 1
        assert Membership.objects.filter(user=user, project__personal_of=user).count() == 1
