"""The Share panel (``templates/sharing/_panel.html``) of the pages that share: ``{% share_run_panel
run role %}`` on a run's page, with the run's links; ``{% share_compare_panel runs %}`` on the compare
page. Rendered on every request, so a new link, a view or a revocation shows at once, without the
pages that show them knowing more."""

from __future__ import annotations

from django import template

from portal.projects.access import can, role_in
from portal.projects.models import Role
from portal.sharing import services
from portal.sharing.forms import ShareForm
from portal.sharing.models import ShareLink

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


@register.inclusion_tag("sharing/_panel.html", takes_context=True)
def share_run_panel(context, run, role: str) -> dict:
    """The panel of ``run``'s page for a reader of ``role``: its links (one query), with their views
    and a Revoke button where the reader may revoke."""
    request = context["request"]
    links = list(ShareLink.objects.filter(run=run).select_related("created_by", "revoked_by"))
    view_slot = context.get("share_view_slot")  # a kept run page fills each link's views in per request
    for link in links:
        link.may_revoke = services.may_revoke(request.user, link, role)
        if view_slot:
            link.views_slot, link.last_view_slot = view_slot("views", link.pk), view_slot("last", link.pk)
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
