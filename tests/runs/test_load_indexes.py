"""The two lookups that grew with a project's history now read an index (migrations runs 0014 and
hooks 0002): the runs in flight counted before every start, and the replay check of every verified
webhook delivery. Each scanned the whole table before (docs/performance.md, "The portal under its
own load")."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from portal.hooks.models import WebhookDelivery
from portal.runs.models import Run
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def plan(queryset) -> str:
    """PostgreSQL's plan when it may not fall back to a full scan: an index the query cannot use
    does not appear, however small the table."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    return queryset.explain()


def test_runs_in_flight_of_a_project_are_counted_from_an_index(owner):
    run = make_run(owner, status=Run.Status.QUEUED)
    # A project's history: thousands of ended runs beside the one in flight.
    Run.objects.bulk_create(
        Run(project=run.project, owner=owner, target=run.target, status=Run.Status.SUCCEEDED)
        for _ in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
    active = Run.objects.filter(project=run.project, status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
    assert "run_project_active_idx" in plan(active.values("pk"))
    assert active.count() == 1


def test_the_replay_check_of_a_delivery_reads_an_index():
    used = WebhookDelivery.objects.filter(trigger_id=1, status_code__in=(200, 202))
    # On an empty table the planner may as well walk the trigger's time index and filter; without it
    # (dropped inside this test's transaction) the lookup must still find the signature in an index.
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX hookdelivery_trigger_time_idx")
    found = plan(used.filter(signature_digest="ab" * 32))
    assert re.search(r"Index Cond: .*signature_digest", found), found
