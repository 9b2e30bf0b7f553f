"""The scenario's webhook page: create (the secret shown once), rotate, settings, disable, logs,
audit; and ``tollgate webhook …``."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from portal import vault
from portal.audit.models import AuditEvent
from portal.hooks import services
from portal.hooks.models import CallbackDelivery, WebhookDelivery, WebhookTrigger
from portal.projects.models import Membership, Role, personal_project
from portal.scenarios.models import Scenario
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario(owner):
    run = make_run(owner)
    return Scenario.objects.create(project=personal_project(owner), target=run.target, name="nightly")


def page(client, scenario, **post):
    url = reverse("hooks-scenario", args=[scenario.code])
    return client.post(url, post) if post else client.get(url)


def test_create_shows_the_secret_once_and_stores_it_encrypted(client, owner, scenario):
    client.force_login(owner)
    assert b"Create the webhook" in page(client, scenario).content
    made = page(client, scenario, action="create")
    assert made.status_code == 302  # post/redirect/get: a reload cannot rotate the secret again
    trigger = WebhookTrigger.objects.get(scenario=scenario)
    secret = vault.decrypt(trigger.secret_enc)
    assert secret not in str(dict(client.session))  # sealed while it waits for its page
    shown = page(client, scenario)
    html = shown.content.decode()
    assert secret in html and services.webhook_url(trigger, shown.wsgi_request) in html
    assert secret not in trigger.secret_enc and len(trigger.public_id) >= 32
    assert trigger.created_by == owner and trigger.format == "tollgate"
    again = page(client, scenario).content.decode()
    assert secret not in again and trigger.public_id in again  # the URL stays, the secret is gone
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CREDENTIAL_SAVED)
    assert (
        event.detail
        == {
            "credential": "webhook secret",
            "action": "create",
            "scenario": str(scenario.code),
        }
        and event.project_id == scenario.project_id
    )


def test_rotate_keeps_the_old_secret_for_the_grace_period(client, owner, scenario, settings):
    trigger, old = services.create_trigger(scenario, owner)
    client.force_login(owner)
    rotated = page(client, scenario, action="rotate")
    assert rotated.status_code == 302
    other = Scenario.objects.create(project=scenario.project, target=scenario.target, name="other")
    assert b"secret-value" not in page(client, other).content  # another scenario's page: not there
    shown = page(client, scenario).content.decode()
    trigger.refresh_from_db()
    new = vault.decrypt(trigger.secret_enc)
    assert new != old and new in shown and old not in shown
    assert services.verifying_secrets(trigger) == [new, old]
    hours = (trigger.previous_valid_until - trigger.rotated_at).total_seconds() / 3600
    assert hours == pytest.approx(settings.TOLLGATE_WEBHOOK_GRACE_HOURS)
    assert AuditEvent.objects.filter(detail__action="rotate").count() == 1


def test_settings_disable_and_field_errors(client, owner, scenario):
    trigger, _ = services.create_trigger(scenario, owner)
    client.force_login(owner)
    bad = page(client, scenario, action="settings", format="github", rate_per_minute="1000")
    assert bad.status_code == 400 and b"Between 1 and 60" in bad.content
    ok = page(client, scenario, action="settings", format="github", rate_per_minute="3")
    assert ok.status_code == 302
    assert page(client, scenario, action="disable").status_code == 302
    trigger.refresh_from_db()
    assert (trigger.format, trigger.rate_per_minute, trigger.enabled) == ("github", 3, False)
    page(client, scenario, action="enable")
    trigger.refresh_from_db()
    assert trigger.enabled


def test_the_logs_show_deliveries_and_callback_attempts(client, owner, scenario):
    trigger, _ = services.create_trigger(scenario, owner)
    run = make_run(owner)
    run.scenario = scenario
    run.save()
    WebhookDelivery.objects.create(
        trigger=trigger, status_code=409, outcome="Replayed: seen before", ip="127.0.0.0/24"
    )
    CallbackDelivery.objects.create(
        run=run, url="http://127.0.0.1:1/cb", attempt=2, status="failed", error="answered 503"
    )
    client.force_login(owner)
    html = page(client, scenario).content.decode()
    assert "Replayed: seen before" in html and "answered 503" in html and "127.0.0.0/24" in html


def test_viewers_may_not_and_outsiders_do_not_see_it(client, owner, outsider, scenario, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    Membership.objects.create(project=scenario.project, user=viewer, role=Role.VIEWER)
    client.force_login(viewer)
    assert page(client, scenario, action="create").status_code == 403
    client.force_login(outsider)
    assert page(client, scenario, action="create").status_code == 404
    assert not WebhookTrigger.objects.exists()


def command(*args) -> str:
    out = io.StringIO()
    call_command("tollgate", *args, stdout=out)
    return out.getvalue()


def test_cli_create_rotate_and_deliveries(owner, scenario):
    made = json.loads(command("webhook", "create", "--scenario", str(scenario.code), "--github", "--json"))
    trigger = WebhookTrigger.objects.get(scenario=scenario)
    assert made["webhook_url"] == services.webhook_url(trigger) and made["format"] == "github"
    assert vault.decrypt(trigger.secret_enc) == made["webhook_secret"] and trigger.created_by == owner
    rotated = json.loads(command("webhook", "rotate", "--scenario", str(scenario.code), "--json"))
    trigger.refresh_from_db()
    assert services.verifying_secrets(trigger) == [rotated["webhook_secret"], made["webhook_secret"]]
    WebhookDelivery.objects.create(trigger=trigger, status_code=401, outcome="bad signature")
    listed = json.loads(command("webhook", "deliveries", "--scenario", str(scenario.code), "--json"))
    assert [(d["status"], d["outcome"]) for d in listed] == [(401, "bad signature")]
    assert "401  bad signature" in command("webhook", "deliveries", "--scenario", str(scenario.code))
    assert AuditEvent.objects.filter(detail__credential="webhook secret").count() == 2


def test_cli_refusals(owner, outsider, scenario):
    with pytest.raises(CommandError, match="no scenario"):
        command("webhook", "create", "--scenario", "not-a-uuid")
    with pytest.raises(CommandError, match="has no webhook"):
        command("webhook", "rotate", "--scenario", str(scenario.code))
    with pytest.raises(CommandError, match="may not start runs"):
        command("webhook", "create", "--scenario", str(scenario.code), "--user", outsider.username)


def test_rotate_secrets_re_encrypts_webhook_secrets(owner, scenario, settings):
    old_key, new_key = vault.generate_key(), vault.generate_key()
    settings.TOLLGATE_SECRET_KEYS = [old_key]
    trigger, first = services.create_trigger(scenario, owner)
    second = services.rotate(trigger)
    WebhookDelivery.objects.create(
        trigger=trigger, status_code=202, outcome="started", response_enc=vault.seal({"a": 1})
    )
    settings.TOLLGATE_SECRET_KEYS = [new_key, old_key]
    assert "and 1 webhook secret(s)" in command("rotate-secrets")
    settings.TOLLGATE_SECRET_KEYS = [new_key]
    trigger.refresh_from_db()
    assert services.verifying_secrets(trigger) == [second, first]
    assert vault.unseal(WebhookDelivery.objects.get().response_enc) == {"a": 1}


def test_the_admin_lists_webhooks_without_their_secrets(client, owner, scenario, django_user_model):
    trigger, secret = services.create_trigger(scenario, owner)
    WebhookDelivery.objects.create(trigger=trigger, status_code=401, outcome="bad signature")
    staff = django_user_model.objects.create_superuser("root", password="root-pass-123")
    client.force_login(staff)
    for name in ("webhooktrigger", "webhookdelivery", "callbackdelivery"):
        listed = client.get(reverse(f"admin:hooks_{name}_changelist"))
        assert listed.status_code == 200
    html = client.get(reverse("admin:hooks_webhooktrigger_change", args=[trigger.pk])).content.decode()
    assert "nightly" in html
    assert secret not in html and trigger.secret_enc not in html and trigger.public_id not in html


def test_the_scenario_page_shows_the_webhook_section(client, owner, scenario, django_user_model):
    Scenario.objects.filter(pk=scenario.pk).update(callback_url="http://127.0.0.1:1/cb")
    client.force_login(owner)
    url = reverse("scenarios-detail", args=[scenario.code])
    html = client.get(url).content.decode()
    assert "no callback is sent" in html and reverse("hooks-scenario", args=[scenario.code]) in html
    trigger, secret = services.create_trigger(scenario, owner)
    html = client.get(url).content.decode()
    assert "enabled" in html and "no callback is sent" not in html
    assert secret not in html and trigger.public_id not in html
    viewer = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    Membership.objects.create(project=scenario.project, user=viewer, role=Role.VIEWER)
    client.force_login(viewer)
    assert reverse("hooks-scenario", args=[scenario.code]) not in client.get(url).content.decode()
