"""``{% share_compare_panel runs %}`` on the compare page: the Share form, without the compare view
knowing more. The run page's panel, with the run's links, is ``portal.sharing.panel``."""

from __future__ import annotations

from django import template

from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.sharing.forms import ShareForm

register = template.Library()


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
