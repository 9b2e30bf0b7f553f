"""``{% share_panel run %}`` on the run page and ``{% share_compare_panel runs %}`` on the compare
page: the Share form and (on the run page) the run's links, without the run views knowing more."""

from __future__ import annotations

from django import template

from portal.projects.models import Role
from portal.runs.access import can, role_in
from portal.sharing import services
from portal.sharing.forms import ShareForm

register = template.Library()


@register.inclusion_tag("sharing/_panel.html", takes_context=True)
def share_panel(context, run) -> dict:
    request = context["request"]
    # The run page knows the reader's role already (``run_role``); elsewhere it is asked.
    role = context["run_role"] if "run_role" in context else role_in(request.user, run.project_id)
    links = list(run.share_links.select_related("created_by", "revoked_by").order_by("-created", "-pk"))
    for link in links:
        link.may_revoke = services.may_revoke(request.user, link, role)
    return {
        "request": request,
        "csrf_token": context.get("csrf_token"),
        "can_share": can(role, Role.MEMBER),
        "form": ShareForm(),
        "query": f"run={run.code}",
        "links": links,
        "next": request.get_full_path(),
        "what": "this run's report",
    }


@register.inclusion_tag("sharing/_panel.html", takes_context=True)
def share_compare_panel(context, runs) -> dict:
    request = context["request"]
    # Only runs of one project share together (the compare page may mix projects the user is in).
    projects = {run.project_id for run in runs}
    return {
        "request": request,
        "csrf_token": context.get("csrf_token"),
        "can_share": len(projects) == 1 and can(role_in(request.user, projects.pop()), Role.MEMBER),
        "form": ShareForm(),
        "query": "runs=" + ",".join(str(run.code) for run in runs),
        "links": None,
        "next": request.get_full_path(),
        "what": "this compare view (in this order, run 1 the reference)",
    }
