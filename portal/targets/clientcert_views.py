"""A target's client certificates page (mutual TLS): what it holds, by its public facts only (key type,
subject, issuer, expiry, SHA-256 fingerprint; never the key), a pair given as PEM files or pasted,
replacing the one of its key type, and forgetting one after a confirmation.

Who may: every role reads (the facts are in the run reports too); members and owners add and replace,
as they may on the run form and the API; owners forget, as they delete SSH access. Other projects 404.
Saving and forgetting are audited (``portal.targets.clientcerts``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods

from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.lib.tls.clientcerts import KEY_TYPES, LABELS, MAX_PEM_CHARS, MTLS_ARM
from portal.projects.access import can, require_role
from portal.projects.deleting import confirm_then_delete
from portal.projects.models import Role
from portal.targets.access import get_target_for_user
from portal.targets.clientcerts import forget, save_client_cert
from portal.targets.forms import ClientCertForm, MtlsUrlForm
from portal.targets.models import ClientCertificate

# Two PEM files and two pasted texts of at most MAX_PEM_CHARS each, with the form's framing.
MAX_POST_BYTES = 4 * MAX_PEM_CHARS + 16 * 1024


@csrf_exempt  # CSRF is checked by _page, after the size (the middleware would parse the body first)
@require_http_methods(["GET", "POST"])
def client_certs(request: HttpRequest, code) -> HttpResponse:
    """A POST larger than any pair is refused unread (Django would spool a large upload to disk)."""
    if request.method == "POST" and int(request.META.get("CONTENT_LENGTH") or 0) > MAX_POST_BYTES:
        return HttpResponse(
            f"A client certificate upload is at most {MAX_POST_BYTES // 1024} KiB.", status=413
        )
    return _page(request, code)


@csrf_protect
@login_required
def _page(request: HttpRequest, code) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    held = sorted(ClientCertificate.objects.filter(target=target), key=lambda c: KEY_TYPES.index(c.key_type))
    form, url_form = ClientCertForm(), MtlsUrlForm(initial={"mtls_url": target.mtls_url})
    if request.method == "POST" and request.POST.get("action") == "mtls_url":
        require_role(role, Role.MEMBER)
        url_form = MtlsUrlForm(request.POST)
        if url_form.is_valid():
            _save_mtls_url(request, target, url_form.cleaned_data["mtls_url"])
            return redirect("target-client-certs", code=target.code)
    elif request.method == "POST":
        require_role(role, Role.MEMBER)
        form = ClientCertForm(request.POST, request.FILES)
        if form.is_valid():
            cert = form.pair
            replaced = any(stored.key_type == cert.key_type for stored in held)
            save_client_cert(target, cert, request=request)
            label = LABELS[cert.key_type]
            said = f"{label} client certificate {cert.subject} saved"
            said += f", replacing the {label} one held before." if replaced else "."
            messages.info(request, f"{said} The key is stored encrypted and never shown again.")
            return redirect("target-client-certs", code=target.code)
    ctx = {
        "target": target,
        "held": held,
        "now": timezone.now(),
        "form": form,
        "url_form": url_form,
        "can_write": can(role, Role.MEMBER),
        "can_forget": can(role, Role.OWNER),
        "arm": MTLS_ARM,
        "arm_kind": LABELS[held[0].key_type] if held else None,  # KEY_TYPES' order: the arm's choice
    }
    return render(request, "targets/client_certs.html", ctx)


def _save_mtls_url(request: HttpRequest, target, url: str) -> None:
    """Store the target's mTLS URL (audited as a target change, before and after)."""
    if url == target.mtls_url:
        messages.info(request, "Nothing changed.")
        return
    before = target.mtls_url
    target.mtls_url = url
    target.save(update_fields=["mtls_url"])
    audit.record(
        request,
        AuditEvent.Kind.TARGET_CHANGED,
        target=str(target.code),
        before={"mtls_url": before},
        after={"mtls_url": url},
        project_id=target.project_id,
    )
    where = url or "the TLS URL"
    messages.info(request, f"The {MTLS_ARM} arm of this target's runs now goes to {where}.")


@login_required
@require_http_methods(["GET", "POST"])
def client_cert_forget(request: HttpRequest, code, key_type: str) -> HttpResponse:
    target, role = get_target_for_user(request, code)
    if key_type not in LABELS:
        raise Http404("no such key type")
    require_role(role, Role.OWNER)
    stored = ClientCertificate.objects.filter(target=target, key_type=key_type).first()
    label = LABELS[key_type]
    if stored is None:
        messages.info(request, f"{target.name} holds no {label} client certificate to forget.")
        return redirect("target-client-certs", code=target.code)
    return confirm_then_delete(
        request,
        what=f"the {label} client certificate of {target.name} ({stored.subject})",
        consequences=[
            "The stored certificate and its private key (their ciphertext) are erased.",
            f"Runs of this target with the {MTLS_ARM} arm or the matrix's client_cert dimension need "
            "one again (this page, the run form, the API or the CLI); runs already made keep their reports.",
        ],
        back=reverse("target-client-certs", args=[target.code]),
        delete=lambda: forget(target, key_type, request=request),
        done=f"The {label} client certificate is forgotten: its key is gone from Tollgate.",
        then="target-client-certs",
        code=target.code,
    )
