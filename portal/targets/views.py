from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Count, Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.lib.report.targetnames import default_name
from portal.lib.security.verification import HEADER, WELL_KNOWN_PATH
from portal.lib.security.verification import origin as lib_origin
from portal.projects.access import current_project, require_role
from portal.projects.models import Role
from portal.targets import editing, verification
from portal.targets.access import get_target_for_user, targets_for
from portal.targets.forms import SshAccessForm, TargetEditForm, TargetForm
from portal.targets.models import ClientCertificate, SshAccess
from portal.targets.naming import labels_of
from portal.targets.sshaccess import save_ssh_access

Kind = AuditEvent.Kind


@login_required
@require_http_methods(["GET", "POST"])
def ssh_settings(request: HttpRequest, code) -> HttpResponse:
    # SSH credentials are the project owners' business: members and viewers get 403.
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    access = SshAccess.objects.filter(target=target).first()
    if request.method == "POST":
        form = SshAccessForm(request.POST, has_key=access is not None)
        if form.is_valid():
            save_ssh_access(target, form.cleaned_data, request=request)
            messages.info(
                request, "SSH access saved. Add the public key below to the server's authorized_keys."
            )
            return redirect("target-ssh", code=target.code)
    else:
        initial = {"server_process": "nginx", "key_source": "generate"}
        if access:
            initial = {
                "host": access.host,
                "port": access.port,
                "username": access.username,
                "server_process": access.server_process,
                "key_source": "keep",
                # The private key is never rendered back; the pinned host key is public.
                "known_hosts": access.known_hosts,
            }
        form = SshAccessForm(initial=initial, has_key=access is not None)
    return render(request, "targets/ssh.html", {"target": target, "access": access, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def target_verification(request: HttpRequest, code) -> HttpResponse:
    """The token and how to serve it; POST (Verify now, members and owners) fetches it, sending
    nothing else."""
    target, role = get_target_for_user(request, code)
    if request.method == "POST":
        require_role(role, Role.MEMBER)
        outcome = verification.verify(target)
        audit.record(
            request,
            Kind.TARGET_VERIFIED,
            target=str(target.code),
            verified=outcome.verified,
            method=outcome.method or "",
            error=outcome.error or "",
            project_id=target.project_id,
        )
        if outcome.verified:
            messages.info(request, f"Verified ({outcome.method}).")
        else:
            messages.error(request, f"Not verified: {outcome.error}")
        return redirect("target-verification", code=target.code)
    urls = verification.target_urls(target)
    ctx = {
        "target": target,
        "state": verification.status(target),
        "expires": verification.expires_at(target),
        "origins": [lib_origin(url) for url, _ in verification.origins_needing(urls)],
        "path": WELL_KNOWN_PATH,
        "header": HEADER,
    }
    return render(request, "targets/verification.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def target_edit(request: HttpRequest, code) -> HttpResponse:
    """Correct a target's name and URLs in place (members and owners, as adding one): runs keep what
    they measured, scenarios follow, a new origin is verified again (``portal.targets.editing``)."""
    target, role = get_target_for_user(request, code)
    require_role(role, Role.MEMBER)
    if request.method == "POST":
        form = TargetEditForm(request.POST, target=target)
        if form.is_valid():
            before = {"name": target.name, "plain_url": target.plain_url, "tls_url": target.tls_url}
            edit = editing.edit_target(target, **form.cleaned_data)
            if not edit.changed:
                messages.info(request, "Nothing changed.")
                return redirect("targets-list")
            audit.record(
                request,
                Kind.TARGET_CHANGED,
                target=str(target.code),
                before=before,
                after={**form.cleaned_data, "name": edit.name},
                scenarios=edit.scenarios,
                verification_reset=edit.reverify,
                project_id=target.project_id,
            )
            _edit_messages(request, edit)
            if edit.reverify:
                return redirect("target-verification", code=target.code)
            return redirect("targets-list")
    else:
        initial = {"name": target.name, "plain_url": target.plain_url, "tls_url": target.tls_url}
        form = TargetEditForm(initial=initial, target=target)
    ctx = {
        "target": target,
        "form": form,
        "scenarios": list(target.scenarios.order_by("name").values_list("name", flat=True)),
        "run_count": target.runs.count(),
        "named_after_url": target.name == default_name(target.plain_url, target.tls_url),
    }
    return render(request, "targets/edit.html", ctx)


def _edit_messages(request: HttpRequest, edit: editing.Edit) -> None:
    said = [f"Target {edit.name} is saved; its runs keep the URLs they measured."]
    if edit.scenarios:
        said.append(f"Its scenarios use the new URLs from their new version: {', '.join(edit.scenarios)}.")
    if edit.secrets_left_behind:
        said.append(
            "Their saved headers and credentials belong to the old address and are not sent to the new "
            f"one: type them again on the next run of {', '.join(edit.secrets_left_behind)}."
        )
    if edit.reverify:
        said.append(f"New address {', '.join(edit.reverify)}: verify the target again before its next run.")
    messages.info(request, " ".join(said))


@login_required
@require_POST
def ssh_forget_host_key(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    require_role(role, Role.OWNER)
    SshAccess.objects.filter(target=target).update(known_hosts="", host_key_fingerprint="", pinned_at=None)
    audit.record(
        request,
        Kind.CREDENTIAL_FORGOTTEN,
        credential="ssh host key",
        target=str(target.code),
        project_id=target.project_id,
    )
    messages.info(request, "The pinned host key is forgotten; the next probe pins the key it sees.")
    return redirect("target-ssh", code=target.code)


@login_required
@require_http_methods(["GET", "POST"])
def targets_list(request: HttpRequest) -> HttpResponse:
    project, role = current_project(request)
    targets = (
        targets_for(request.user)
        .filter(project=project)
        .annotate(run_count=Count("runs"))
        .select_related("ssh")
        # RSA before ECDSA, as the client certificates page lists them.
        .prefetch_related(Prefetch("client_certs", ClientCertificate.objects.order_by("-key_type")))
        .order_by("name")
    )
    if request.method == "POST":
        require_role(role, Role.MEMBER)
        form = TargetForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            target = editing.get_or_create_target(project, data["name"], data["plain_url"], data["tls_url"])
            if verification.status(target) in (verification.UNVERIFIED, verification.EXPIRED):
                messages.info(request, f"Target {target.name} is added; verify it before the first run.")
                return redirect("target-verification", code=target.code)
            messages.info(request, f"Target {target.name} is ready; give it SSH access for server probes.")
            return redirect("target-ssh", code=target.code)
    else:
        form = TargetForm()
    targets = list(targets)
    ctx = {
        "targets": targets,
        "form": form,
        "target_labels": labels_of(targets),
        "can_write": role != Role.VIEWER,
        "is_owner": role == Role.OWNER,
    }
    return render(request, "targets/list.html", ctx)
