"""The webhook page of a scenario (members and owners of its project): create the trigger, see its
URL, the secret once, rotate it, choose the format, disable it; the delivery and callback logs."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from portal import vault
from portal.audit import log as audit
from portal.audit.models import AuditEvent
from portal.hooks import services
from portal.hooks.models import CallbackDelivery, WebhookDelivery, WebhookTrigger
from portal.projects.access import require_role
from portal.projects.models import Role
from portal.scenarios.access import get_scenario_for_user

LOG_ROWS = 50
ACTIONS = ("create", "rotate", "settings", "disable", "enable")
SECRET_KEY = "hooks_new_secret"  # noqa: S105 - a session key's name


class SettingsForm(forms.ModelForm):
    class Meta:
        model = WebhookTrigger
        fields = ["format", "rate_per_minute"]

    def clean_rate_per_minute(self) -> int:
        rate = self.cleaned_data["rate_per_minute"]
        if not 1 <= rate <= 60:
            raise forms.ValidationError("Between 1 and 60 runs per minute.")
        return rate


def _pop_secret(request: HttpRequest, scenario) -> str:
    """The secret just made for this scenario, once (the next page shows it, no other)."""
    sealed = request.session.get(SECRET_KEY)
    if not sealed:
        return ""
    try:
        data = vault.unseal(sealed)
    except vault.SecretError:
        data = {}
    if data.get("scenario") not in (None, str(scenario.code)):
        return ""  # another scenario's: it waits for its own page
    del request.session[SECRET_KEY]
    return data.get("secret", "")


def _audit(request: HttpRequest, scenario, action: str) -> None:
    audit.record(
        request,
        AuditEvent.Kind.CREDENTIAL_SAVED,
        credential="webhook secret",
        action=action,
        scenario=str(scenario.code),
        project_id=scenario.project_id,
    )


def _page(request: HttpRequest, scenario, trigger, *, secret: str = "", form=None, status: int = 200):
    ctx = {
        "scenario": scenario,
        "trigger": trigger,
        "secret": secret,
        "webhook_url": services.webhook_url(trigger, request) if trigger else "",
        "form": form or SettingsForm(instance=trigger),
        "deliveries": WebhookDelivery.objects.filter(trigger=trigger).select_related("run")[:LOG_ROWS]
        if trigger
        else [],
        "callbacks": CallbackDelivery.objects.filter(run__scenario=scenario).select_related("run")[:LOG_ROWS],
        "grace_hours": services.grace_hours(),
    }
    return render(request, "hooks/scenario.html", ctx, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_webhook(request: HttpRequest, code) -> HttpResponse:
    scenario, role = get_scenario_for_user(request, code)
    require_role(role, Role.MEMBER)
    trigger = WebhookTrigger.objects.filter(scenario=scenario).first()
    if request.method == "GET":
        return _page(request, scenario, trigger, secret=_pop_secret(request, scenario))
    action = request.POST.get("action", "")
    if action == "create" or (action == "rotate" and trigger is not None):
        if action == "create":
            trigger, secret = services.create_trigger(scenario, request.user)
        else:
            secret = services.rotate(trigger)
        _audit(request, scenario, action)
        # Post/redirect/get, so a reload cannot rotate again; the secret waits sealed in the session
        # for that one page, which takes it out.
        request.session[SECRET_KEY] = vault.seal({"scenario": str(scenario.code), "secret": secret})
        return redirect("hooks-scenario", code=scenario.code)
    if trigger is None or action not in ACTIONS:
        messages.error(request, "Create the webhook first." if trigger is None else "Unknown action.")
        return redirect("hooks-scenario", code=scenario.code)
    if action == "settings":
        form = SettingsForm(request.POST, instance=trigger)
        if not form.is_valid():
            return _page(request, scenario, trigger, form=form, status=400)
        form.save()
        messages.info(request, "Webhook settings saved.")
    else:
        trigger.enabled = action == "enable"
        trigger.save(update_fields=["enabled"])
        _audit(request, scenario, action)
        messages.info(request, f"Webhook {action}d.")
    return redirect("hooks-scenario", code=scenario.code)
