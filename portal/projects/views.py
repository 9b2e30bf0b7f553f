"""The projects page, the switcher and members: owners invite members by username with a role (the
account joins when it accepts: the page never tells whether an account of that name exists), change
roles and remove members, never the last owner nor a personal project's own user."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.projects.access import SESSION_KEY, current_project, get_project_for_user, require_role
from portal.projects.models import Invitation, Membership, Project, Role


class ProjectForm(forms.Form):
    name = forms.CharField(max_length=150)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if Project.objects.filter(name=name).exists():
            raise forms.ValidationError("A project of that name exists: choose another.")
        return name


class MemberForm(forms.Form):
    # A name as typed: whether an account of that name exists is never looked up here (the answer
    # would tell any user who has a project of their own, which is every user).
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices)
    action = forms.ChoiceField(
        choices=[("add", "add"), ("role", "change role"), ("remove", "remove"), ("withdraw", "withdraw")]
    )

    def clean_username(self) -> str:
        return self.cleaned_data["username"].strip()


@login_required
@require_http_methods(["GET", "POST"])
def projects_list(request: HttpRequest) -> HttpResponse:
    """The user's projects and roles; any user may start a new project (and owns it)."""
    current, _ = current_project(request)
    form = ProjectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            project = Project.objects.create(name=form.cleaned_data["name"])
            Membership.objects.create(project=project, user=request.user, role=Role.OWNER)
        request.session[SESSION_KEY] = str(project.code)
        messages.info(request, f"Project {project.name} created; it is now your current project.")
        return redirect("projects-members", code=project.code)
    memberships = Membership.objects.filter(user=request.user).select_related("project")
    invitations = Invitation.objects.filter(
        username=request.user.get_username(), created__gt=Invitation.valid_since()
    ).select_related("project", "invited_by")
    ctx = {"memberships": memberships, "current": current, "form": form, "invitations": invitations}
    return render(request, "projects/list.html", ctx)


@login_required
@require_POST
def projects_switch(request: HttpRequest) -> HttpResponse:
    project, _ = get_project_for_user(request, request.POST.get("project") or "")
    request.session[SESSION_KEY] = str(project.code)
    back = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(back, {request.get_host()}, require_https=request.is_secure()):
        back = ""
    # The object on the page may belong to the project left: the list of the new one is safer.
    return redirect(back if back.startswith("/projects/") else "runs-list")


@login_required
@require_http_methods(["GET", "POST"])
def projects_members(request: HttpRequest, code) -> HttpResponse:
    project, role = get_project_for_user(request, code)
    form = MemberForm(request.POST or None)
    if request.method == "POST":
        require_role(role, Role.OWNER)
        if form.is_valid() and form.cleaned_data["action"] in ("add", "withdraw"):
            problem = _invite(request, project, form.cleaned_data)
            if problem is None:
                return redirect("projects-members", code=project.code)
            form.add_error(None, problem)
        elif form.is_valid():
            problem = _change_member(project, form.cleaned_data)
            if problem is None:
                _audit_member(request, project, form.cleaned_data)
                return redirect("projects-members", code=project.code)
            form.add_error(None, problem)
    members = project.memberships.select_related("user").order_by("user__username")
    ctx = {
        "project": project,
        "role": role,
        "members": members,
        "invitations": project.invitations.order_by("username") if role == Role.OWNER else [],
        "form": form,
        "roles": Role.choices,
    }
    return render(request, "projects/members.html", ctx)


def _invite(request: HttpRequest, project: Project, data: dict) -> str | None:
    """Invite a name (or withdraw its invitation): the same answer whether an account of that name
    exists or not. Members are on the page already, so naming one says nothing new."""
    name, role = data["username"], data["role"]
    if data["action"] == "withdraw":
        project.invitations.filter(username=name).delete()
        return None
    found = project.memberships.filter(user__username=name).first()
    if found is not None:
        return f"{name} is already {found.role} of {project.name}."
    # Inviting again renews an invitation (and its time to be accepted).
    Invitation.objects.update_or_create(
        project=project,
        username=name,
        defaults={"role": role, "invited_by": request.user, "created": timezone.now()},
    )
    messages.info(
        request,
        f"If an account named {name} exists, it can now join {project.name} as {role}: it accepts the "
        "invitation on its Projects page (tell them). Until then it is listed under Invited.",
    )
    return None


@login_required
@require_POST
def projects_invitation(request: HttpRequest, code, answer: str) -> HttpResponse:
    """Accept or decline an invitation to the user's own name (anyone else's: 404)."""
    if answer not in ("accept", "decline"):
        raise Http404("accept or decline")
    invitation = get_object_or_404(Invitation, code=code, username=request.user.get_username())
    if answer == "accept" and invitation.expired:
        messages.error(
            request,
            f"The invitation to {invitation.project.name} expired on "
            f"{invitation.expires:%Y-%m-%d %H:%M} UTC: ask an owner of the project to invite you again.",
        )
        return redirect("projects-list")
    project, role = invitation.project, invitation.role
    with transaction.atomic():
        invitation.delete()
        if answer == "accept":
            _, made = Membership.objects.get_or_create(
                project=project, user=request.user, defaults={"role": role}
            )
            if made:
                audit.record(
                    request,
                    Kind.MEMBER_ADDED,
                    member=request.user.get_username(),
                    role=role,
                    invited_by=invitation.invited_by.get_username() if invitation.invited_by else "",
                    project_id=project.pk,
                )
    if answer == "accept":
        messages.info(request, f"You are {role} of {project.name} now.")
    return redirect("projects-list")


def _change_member(project: Project, data: dict) -> str | None:
    """Re-role or remove a member; the reason it cannot be done, or None when done. Only members are
    looked up: any other name, an account's or not, is "not a member"."""
    name, role, action = data["username"], data["role"], data["action"]
    found = project.memberships.select_related("user").filter(user__username=name).first()
    if found is None:
        return f"{name} is not a member of {project.name}."
    user = found.user
    if project.personal_of_id == user.pk and (action == "remove" or role != Role.OWNER):
        return f"{project.name} is the personal project of {user.username}: they stay its owner."
    others = project.memberships.filter(role=Role.OWNER).exclude(pk=found.pk)
    if found.role == Role.OWNER and (action == "remove" or role != Role.OWNER) and not others.exists():
        return "A project keeps at least one owner: make someone else owner first."
    if action == "remove":
        found.delete()
    else:
        found.role = role
        found.save(update_fields=["role"])
    return None


Kind = AuditEvent.Kind
MEMBER_EVENTS = {"add": Kind.MEMBER_ADDED, "remove": Kind.MEMBER_REMOVED}


def _audit_member(request: HttpRequest, project: Project, data: dict) -> None:
    kind = MEMBER_EVENTS.get(data["action"], Kind.MEMBER_CHANGED)
    audit.record(request, kind, member=data["username"], role=data["role"], project_id=project.pk)
