"""Runs scoped to a requester, by the project rules (``portal.projects.access``): who sees a run,
who deletes it, and the run page's one prepared query."""

from __future__ import annotations

import functools
import sys

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest

from portal.projects.access import can, visible_to
from portal.projects.models import Membership, Role
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.sharing.models import ShareLink
from portal.signing.models import FrozenReport
from portal.targets.models import Target

# The run page's columns of the run (the first of each of run_page_rows' rows); a share link's follow.
RUN_PAGE_COLUMNS = 18


def runs_for(user) -> QuerySet[Run]:
    return visible_to(user, Run)


def get_run_for_user(request: HttpRequest, code, *, related=(), deferred=()) -> tuple[Run, str]:
    """The run and the user's role in its project. Outsiders get 404, never a hint it exists.
    ``related``/``deferred``: more relations to read in the same query, fields of them not to read.
    The role is read from the membership row the visibility filter joins (one per user and project),
    not by a subquery: one join, and half the query's cost on a page that is read all day."""
    try:
        run = (
            runs_for(request.user)
            .annotate(role=F("project__memberships__role"))
            .select_related("target", *related)
            .defer(*deferred)
            .get(code=code)
        )
    except (Run.DoesNotExist, ValidationError):
        raise Http404("No such run") from None
    return run, run.role


def may_delete_run(user, run: Run, role: str | None) -> bool:
    """Owners delete any run of their project; members the runs they started."""
    return can(role, Role.OWNER) or (can(role, Role.MEMBER) and run.owner_id == user.pk)


class PreparedCursor(psycopg.Cursor):
    """Binds parameters on the server and has PostgreSQL prepare each statement once per connection:
    the page's query (joins of seven tables) is planned once, not on every request. Django's own
    cursors bind on the client and never prepare."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


def _cursor():
    if connection.vendor != "postgresql" or not settings.TOLLGATE_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    # Django connects with prepared statements off (None, for connection poolers): a threshold no
    # query reaches lets this cursor's explicit ones be kept, and no other query is prepared (Django's
    # client-binding cursors never are).
    if connection.connection.prepare_threshold is None:
        connection.connection.prepare_threshold = sys.maxsize
    raw = PreparedCursor(connection.connection)
    # Through Django's wrapper: its query log, execute wrappers and error mapping see the query.
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


@functools.cache
def run_page_query() -> str:
    """The query of ``run_page_rows``: table and column names from the models, every value a
    parameter."""
    run, member, target = Run._meta.db_table, Membership._meta.db_table, Target._meta.db_table
    scenario, frozen, link = Scenario._meta.db_table, FrozenReport._meta.db_table, ShareLink._meta.db_table
    users = get_user_model()
    account, name = users._meta.db_table, users._meta.get_field(users.USERNAME_FIELD).column
    return (
        "SELECT r.id, r.status, r.finished, r.error, r.owner_id, r.scenario_version, m.role,"  # noqa: S608
        " t.code, t.name, t.plain_url, t.tls_url, t.baseline_id, b.code, s.name,"
        " f.sha256, f.key_id, f.signed_at,"
        f" (SELECT COUNT(*) FROM {target} t2 JOIN {member} m2 ON m2.project_id = t2.project_id"
        "   WHERE m2.user_id = %s AND t2.name = t.name),"
        " l.code, l.note, l.created_by_id, cu.{name}, l.created, l.expires_at, l.view_count,"
        " l.last_viewed_at, l.revoked_at, ru.{name}"
        f" FROM {run} r"
        f" JOIN {member} m ON m.project_id = r.project_id AND m.user_id = %s"
        f" JOIN {target} t ON t.id = r.target_id"
        f" LEFT JOIN {run} b ON b.id = t.baseline_id"
        f" LEFT JOIN {scenario} s ON s.id = r.scenario_id"
        f" LEFT JOIN {frozen} f ON f.run_id = r.id"
        f" LEFT JOIN {link} l ON l.run_id = r.id"
        f" LEFT JOIN {account} cu ON cu.id = l.created_by_id"
        f" LEFT JOIN {account} ru ON ru.id = l.revoked_by_id"
        " WHERE r.code = %s ORDER BY l.created DESC, l.id DESC"
    ).replace("{name}", name)


def run_page_rows(user, code) -> list[tuple]:
    """The run page's access check (``portal.runs.runpage``): the run only if ``user`` is a member of
    its project (404 otherwise), with the user's role and everything of the page that can change
    after the run ended, then its share links: one row per link (one row without any), the run's
    ``RUN_PAGE_COLUMNS`` first in each. One query, prepared once per connection on PostgreSQL."""
    param = Run._meta.get_field("code").get_db_prep_value(code, connection)
    with _cursor() as cursor:
        cursor.execute(run_page_query(), [user.pk, user.pk, param])
        rows = cursor.fetchall()
    if not rows:
        raise Http404("No such run")
    return rows
