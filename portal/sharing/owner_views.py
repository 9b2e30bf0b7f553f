"""The owner's side of share links (``/shares/…``, login required): create one for a run or a compare
view (members and owners), list the current project's links with their views, revoke (the link's
creator or a project owner). Scoping through portal.runs.access and portal.projects.access."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.projects.access import current_project, require_role, role_in
from portal.projects.models import Membership, Role
from portal.runs.access import get_run_for_user, runs_for
from portal.sharing import services
from portal.sharing.forms import ShareForm
from portal.sharing.models import ShareLink


def _codes(text: str) -> list[str]:
    return list(dict.fromkeys(code.strip() for code in text.split(",") if code.strip()))


def _subject(request: HttpRequest) -> dict:
    """What ``?run=CODE`` or ``?runs=A,B,…`` names, scoped to the user: 404 for what they cannot see,
    403 below the member role."""
    if request.GET.get("run"):
        run, role = get_run_for_user(request, request.GET["run"])
        require_role(role, Role.MEMBER)
        return {"run": run}
    codes = _codes(request.GET.get("runs", ""))
    if not codes or len(codes) > services.MAX_COMPARE:
        raise Http404("name a run (?run=) or the runs of a compare view (?runs=a,b)")
    try:
        found = {
            str(run.code): run
            for run in runs_for(request.user).select_related("target").filter(code__in=codes)
        }
    except ValidationError:
        raise Http404("no such run") from None
    if len(found) != len(codes):
        raise Http404("no such run")
    runs = [found[code] for code in codes]
    for project_id in {run.project_id for run in runs}:
        require_role(role_in(request.user, project_id), Role.MEMBER)
    return {"runs": runs}


@login_required
@require_http_methods(["GET", "POST"])
def share_create(request: HttpRequest) -> HttpResponse:
    """GET: the form alone (the run and compare pages embed it); POST: create, then show the URL once.
    The answer is a page, not a redirect: the token is never stored, not even in the session."""
    subject = _subject(request)
    form = ShareForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            link, token = services.create_share(
                request.user,
                days=form.cleaned_data["days"],
                note=form.cleaned_data["note"],
                request=request,
                **subject,
            )
        except ValueError as exc:
            form.add_error(None, str(exc).capitalize() + ".")
        else:
            ctx = {
                "link": link,
                "url": services.share_url(token, request),
                "status_url": services.status_url(token, request) if link.kind == ShareLink.Kind.RUN else "",
                **subject,
            }
            response = render(request, "sharing/created.html", ctx)
            response["Cache-Control"] = "no-store"  # the page holds the token: not for the back button
            return response
    return render(request, "sharing/new.html", {"form": form, **subject})


@login_required
@require_GET
def share_list(request: HttpRequest) -> HttpResponse:
    # Queries: the current project (1), the page of links with runs, targets and users (1), the count (1).
    project, role = current_project(request)
    links = (
        ShareLink.objects.filter(project=project)
        .select_related("created_by", "revoked_by", "run", "run__target")
        .order_by("-created", "-pk")
    )
    page = Paginator(links, 50).get_page(request.GET.get("page"))
    for link in page.object_list:
        link.may_revoke = services.may_revoke(request.user, link, role)
    return render(request, "sharing/list.html", {"page": page, "project": project, "role": role})


@login_required
@require_POST
def share_revoke(request: HttpRequest, code) -> HttpResponse:
    member_of = Membership.objects.filter(user=request.user).values("project_id")
    link = ShareLink.objects.filter(code=code, project_id__in=member_of).first()
    if link is None:
        raise Http404("no such share link")
    if services.revoke(link, request.user, request=request):
        messages.info(
            request, f"Share link revoked{f' ({link.note})' if link.note else ''}: it now answers 410."
        )
    else:
        messages.info(request, "That share link was already revoked.")
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("sharing-list")
