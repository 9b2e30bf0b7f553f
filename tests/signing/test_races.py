"""Two processes at once (threads with their own database connections here): the first key is made
once, and a run's report is frozen once, whoever comes second reads the first one's."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from portal.signing import services
from portal.signing.models import FrozenReport, SigningKey
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db(transaction=True)


def at_once(function, count: int = 4) -> list:
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list = []

    def work(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = function()
        except Exception as exc:  # reported below, with the thread's own error
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    return results


def test_the_first_key_is_made_once_and_a_report_frozen_once(owner):
    keys = at_once(services.active_key)
    assert len({key.pk for key in keys}) == 1 and SigningKey.objects.count() == 1
    run = make_run(owner)
    frozen = at_once(lambda: services.freeze(run))
    assert len({f.pk for f in frozen}) == 1 and FrozenReport.objects.count() == 1
    assert len({f.body for f in frozen}) == 1
