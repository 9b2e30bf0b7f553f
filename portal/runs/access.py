"""Who may see and do what: the one place that scopes objects to a requester.

Everything (targets, scenarios, runs, SSH access through its target) belongs to a project; a user
sees the objects of the projects they are a member of. Roles, in rising order: *viewer* (read only),
*member* (create targets, scenarios and runs, cancel, pin baselines, delete the runs they started and
scenarios), *owner* (manage members and SSH credentials, delete anything of the project). Views ask
here: an object of a project the user is not in is a 404 (never a hint it exists); an action above
the user's role is a 403.
"""

from __future__ import annotations

import functools
import sys

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.db.models import F, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest

from portal.projects.models import RANK, Membership, Project, Role, personal_project
from portal.runs.models import Run
from portal.sharing.models import ShareLink
from portal.signing.models import FrozenReport
from portal.targets.models import Scenario, Target

SESSION_KEY = "project"
# The run page's columns of the run (the first of each of run_page_rows' rows); a share link's follow.
RUN_PAGE_COLUMNS = 18


def projects_for(user) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user)


def runs_for(user) -> QuerySet[Run]:
    return Run.objects.filter(project__memberships__user=user)


def targets_for(user) -> QuerySet[Target]:
    return Target.objects.filter(project__memberships__user=user)


def scenarios_for(user) -> QuerySet[Scenario]:
    return Scenario.objects.filter(project__memberships__user=user)


def role_in(user, project: Project | int) -> str | None:
    """The user's role in the project, or None when they are not a member."""
    project_id = project.pk if isinstance(project, Project) else project
    return Membership.objects.filter(project_id=project_id, user=user).values_list("role", flat=True).first()


def can(role: str | None, needed: str) -> bool:
    return role is not None and RANK[Role(role)] >= RANK[Role(needed)]


def require_role(role: str | None, needed: str) -> None:
    """403 for an action above the user's role (callers have already 404ed outsiders)."""
    if not can(role, needed):
        raise PermissionDenied(f"this needs the {needed} role")


def current_project(request: HttpRequest) -> tuple[Project, str]:
    """The project chosen with the switcher (kept in the session) and the user's role in it; the
    user's personal project when none was chosen or the membership is gone."""
    code = request.session.get(SESSION_KEY)
    memberships = Membership.objects.filter(user=request.user).select_related("project")
    try:
        found = memberships.filter(project__code=code).first() if code else None
    except ValidationError:  # a session value that is no UUID: the personal project
        found = None
    if found is None:
        found = memberships.filter(project__personal_of=request.user).first()
    if found is None:
        return personal_project(request.user), Role.OWNER
    return found.project, found.role


def get_project_for_user(request: HttpRequest, code) -> tuple[Project, str]:
    memberships = Membership.objects.filter(user=request.user).select_related("project")
    try:
        found = memberships.filter(project__code=code).first()
    except ValidationError:  # not a UUID: no such project either
        found = None
    if found is None:
        raise Http404("No such project")
    return found.project, found.role


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


def _role_of(user) -> Subquery:
    """The user's role in the row's project, in the same query."""
    return Subquery(Membership.objects.filter(project=OuterRef("project"), user=user).values("role")[:1])


def get_target_for_user(request: HttpRequest, code) -> tuple[Target, str]:
    try:
        target = targets_for(request.user).annotate(role=_role_of(request.user)).get(code=code)
    except (Target.DoesNotExist, ValidationError):
        raise Http404("No such target") from None
    return target, target.role


def get_scenario_for_user(request: HttpRequest, code) -> tuple[Scenario, str]:
    try:
        scenario = scenarios_for(request.user).annotate(role=_role_of(request.user)).get(code=code)
    except (Scenario.DoesNotExist, ValidationError):
        raise Http404("No such scenario") from None
    return scenario, scenario.role


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
