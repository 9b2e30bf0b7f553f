"""Who may see and do what: the rules every app scopes its objects by.

Everything (targets, scenarios, runs, SSH access through its target) belongs to a project; a user
sees the objects of the projects they are a member of. Roles, in rising order: *viewer* (read only),
*member* (create targets, scenarios and runs, cancel, pin baselines, delete the runs they started and
scenarios), *owner* (manage members and SSH credentials, delete anything of the project). Views ask
here, or the app's own ``access`` module built on these rules (``portal.runs.access``,
``portal.targets.access``, ``portal.scenarios.access``): an object of a project the user is not in is
a 404 (never a hint it exists); an action above the user's role is a 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest

from portal.projects.models import RANK, Membership, Project, Role, personal_project

SESSION_KEY = "project"


def projects_for(user) -> QuerySet[Project]:
    return Project.objects.filter(memberships__user=user)


def visible_to(user, model: type[Model]) -> QuerySet:
    """The objects of ``model`` (which has a ``project``) in the projects ``user`` is a member of."""
    return model.objects.filter(project__memberships__user=user)


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


def role_of(user) -> Subquery:
    """The user's role in the row's project, in the same query."""
    return Subquery(Membership.objects.filter(project=OuterRef("project"), user=user).values("role")[:1])


def get_for_user(request: HttpRequest, model: type[Model], code) -> tuple[Model, str]:
    """The object of ``model`` with this ``code`` and the user's role in its project; 404 for
    outsiders (and for a code that is no UUID), never a hint it exists."""
    try:
        found = visible_to(request.user, model).annotate(role=role_of(request.user)).get(code=code)
    except (model.DoesNotExist, ValidationError):
        raise Http404(f"No such {model._meta.verbose_name}") from None
    return found, found.role
