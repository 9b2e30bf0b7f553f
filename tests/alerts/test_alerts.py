"""Alerts from stored runs: which channels take a judgement, the signed callback, the outbound address
policy at every attempt, and the alert channels page (ownership, roles, methods)."""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.management import call_command
from django.urls import reverse

from portal import vault
from portal.alerts import services
from portal.alerts.models import AlertChannel, AlertDelivery, AlertSettings
from portal.alerts.sending import deliver
from portal.alerts.services import add_channel
from portal.hooks import services as hooks
from portal.judgements import services as judgements
from portal.judgements.models import Judgement
from portal.lib.security import hooks as webhooks
from portal.projects.models import Membership, Role
from portal.sharing.models import ShareLink

pytestmark = pytest.mark.django_db


def test_a_regression_goes_to_every_enabled_channel_an_improvement_only_where_asked(judged):
    scenario, _, run = judged
    project = scenario.project
    on = add_channel(project, "email", "a@example.com")
    both = add_channel(project, "email", "b@example.com", True)
    off = add_channel(project, "email", "c@example.com")
    AlertChannel.objects.filter(pk=off.pk).update(enabled=False)
    judgement = judgements.judge_run(run.pk)
    assert judgement.status == "regression" and judgements.judge_run(run.pk) == judgement  # once
    keepalive = next(c for c in judgement.result["costs"] if c["name"] == "keepalive_tls")
    assert keepalive["judgement"] == "regression" and keepalive["change_us"] == 400
    assert services.channels_for(judgement) == [on, both]
    Judgement.objects.filter(pk=judgement.pk).update(status="improvement")
    judgement.refresh_from_db()
    assert services.channels_for(judgement) == [both]
    Judgement.objects.filter(pk=judgement.pk).update(status="unchanged")
    judgement.refresh_from_db()
    assert services.channels_for(judgement) == [] and services.compose(judgement) is None


def test_no_share_link_unless_the_project_allows_it(judged):
    scenario, baseline, run = judged
    add_channel(scenario.project, "email", "a@example.com")
    alert = services.compose(judgements.judge_run(run.pk))
    assert "share" not in services.payload(alert)["links"] and not ShareLink.objects.exists()
    assert services.compose(alert.judgement) == alert  # composed once
    alert.delete()
    AlertSettings.objects.create(project=scenario.project, share_links=True)
    links = services.payload(services.compose(Judgement.objects.get(run=run)))["links"]
    link = ShareLink.objects.get()
    assert links["share"].startswith("http") and link.kind == "compare" and link.created_by is None
    assert link.run_codes == [str(baseline.code), str(run.code)]


def test_the_signed_callback_verifies_with_the_scenarios_webhook_secret(judged, callback_receiver):
    scenario, baseline, run = judged
    channel = add_channel(scenario.project, "callback", callback_receiver.url)
    alert = services.compose(judgements.judge_run(run.pk))
    assert deliver(alert.pk, channel.pk, 1) is None
    row = AlertDelivery.objects.get()
    assert row.status == "failed" and "no webhook" in row.error and callback_receiver.received == []
    _, secret = hooks.create_trigger(scenario, scenario.project.memberships.get().user)
    assert deliver(alert.pk, channel.pk, 2) is None
    [got] = callback_receiver.received
    assert webhooks.verify_tollgate([secret], got.headers, got.body, time.time()).ok
    body = json.loads(got.body)
    assert (body["event"], body["run_id"], body["baseline_id"]) == (
        "regression",
        str(run.code),
        str(baseline.code),
    )
    assert body["costs"][0]["name"] == "keepalive_tls" and body["links"]["compare"].endswith(
        f"?runs={baseline.code},{run.code}"
    )


def test_every_attempt_asks_the_outbound_address_policy(judged, callback_receiver):
    scenario, _, run = judged
    channel = add_channel(scenario.project, "webhook", "http://10.20.30.40/hook")
    alert = services.compose(judgements.judge_run(run.pk))
    assert deliver(alert.pk, channel.pk, 1) is None  # refused for good: no retry
    row = AlertDelivery.objects.get()
    assert row.status == "failed" and row.error.startswith("refused by the outbound address policy")


def test_a_client_error_is_final(judged, callback_receiver):
    scenario, _, run = judged
    callback_receiver.statuses = [404]
    channel = add_channel(scenario.project, "webhook", callback_receiver.url)
    alert = services.compose(judgements.judge_run(run.pk))
    assert deliver(alert.pk, channel.pk, 1) is None and "not retried" in AlertDelivery.objects.get().error


def test_the_channels_page_members_add_owners_share_viewers_read_outsiders_see_their_own(
    judged, client, owner, django_user_model
):
    scenario, _, _ = judged
    project = scenario.project
    member = django_user_model.objects.create_user("member", password="member-pass-123")
    viewer = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    Membership.objects.create(project=project, user=viewer, role=Role.VIEWER)
    url = reverse("alerts-list")
    client.force_login(member)
    client.post(reverse("projects-switch"), {"project": str(project.code)})
    refused = client.post(url, {"kind": "webhook", "target": "http://169.254.169.254/latest"})
    assert refused.status_code == 400 and "cloud metadata" in refused.content.decode()
    assert client.post(url, {"kind": "email", "target": "not-an-address"}).status_code == 400
    assert client.post(url, {"kind": "email", "target": "ops@example.com"}).status_code == 302
    assert client.post(url, {"kind": "email", "target": "ops@example.com"}).status_code == 400  # twice
    hook = "http://127.0.0.1:9/services/T000/B000/secret-path"
    assert client.post(url, {"kind": "webhook", "target": hook}).status_code == 302
    slack = AlertChannel.objects.get(project=project, kind="webhook")
    assert (slack.target, services.destination(slack)) == ("http://127.0.0.1:9/…", hook)
    assert "secret-path" not in slack.url_enc and "secret-path" not in client.get(url).content.decode()
    slack.delete()
    channel = AlertChannel.objects.get(project=project)
    assert client.post(url, {"action": "share", "share_links": "on"}).status_code == 403
    client.force_login(viewer)
    client.post(reverse("projects-switch"), {"project": str(project.code)})
    page = client.get(url).content.decode()
    assert "ops@example.com" in page and 'id="alert-add"' not in page
    assert client.post(url, {"action": "remove", "channel": str(channel.code)}).status_code == 403
    client.force_login(owner)
    assert client.post(url, {"action": "share", "share_links": "on"}).status_code == 302
    assert AlertSettings.objects.get(project=project).share_links
    outsider = django_user_model.objects.create_user("outsider", password="outsider-pass-123")
    client.force_login(outsider)
    assert "ops@example.com" not in client.get(url).content.decode()  # their own personal project
    assert client.post(url, {"action": "remove", "channel": str(channel.code)}).status_code == 404
    assert client.put(url).status_code == 405
    client.logout()
    assert client.get(url).status_code == 302


def test_rotate_secrets_re_encrypts_channel_urls_and_sealed_alerts(judged, settings):
    scenario, _, run = judged
    channel = add_channel(scenario.project, "webhook", "http://127.0.0.1:9/hook/secret")
    alert = services.compose(judgements.judge_run(run.pk))
    before = (channel.url_enc, alert.payload_enc)
    settings.TOLLGATE_SECRET_KEYS = [vault.generate_key(), *settings.TOLLGATE_SECRET_KEYS]
    out = io.StringIO()
    call_command("tollgate", "rotate-secrets", stdout=out)
    assert out.getvalue().strip().endswith("and 1 alert channel URL(s)")
    channel.refresh_from_db()
    alert.refresh_from_db()
    assert (channel.url_enc, alert.payload_enc) != before
    assert services.destination(channel) == "http://127.0.0.1:9/hook/secret"
    assert vault.unseal(alert.payload_enc)["links"]["run"].endswith(f"/runs/{run.code}/")
