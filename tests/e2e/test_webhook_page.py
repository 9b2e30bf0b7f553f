"""The scenario's webhook page in Chromium: create, copy the secret shown once, rotate; the policy
holds; the secret the page showed signs a webhook the portal accepts."""

from __future__ import annotations

import json

import pytest

from portal.hooks.models import WebhookTrigger
from portal.projects.models import personal_project
from portal.runs import starting
from tests.e2e.test_report_pages import login
from tests.hooks.conftest import send, signed

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_create_rotate_and_use_the_secret(page, live_server, django_user_model):
    violations: list[str] = []
    page.on("console", lambda msg: "Content Security Policy" in msg.text and violations.append(msg.text))
    user = login(page, live_server, django_user_model)
    scenario = starting.save_scenario(
        personal_project(user),
        "ci",
        {"plain_url": "http://127.0.0.1:9/1k", "tls_url": "https://127.0.0.1:9/1k"},
    )
    page.goto(f"{live_server.url}/hooks/scenario/{scenario.code}/")
    page.click("#create")
    page.wait_for_load_state()
    secret = page.inner_text("#secret-value").strip()
    url = page.inner_text("#webhook-url").strip()
    trigger = WebhookTrigger.objects.get(scenario=scenario)
    assert url == f"{live_server.url}/hooks/{trigger.public_id}" and secret.startswith("whsec_")
    page.screenshot(path="tests/artifacts/webhook-created.png", full_page=True)
    page.reload()
    assert page.locator("#secret-value").count() == 0  # shown once
    page.click("#rotate")
    page.wait_for_load_state()
    rotated = page.inner_text("#secret-value").strip()
    assert rotated != secret and "previous secret keeps verifying" in page.inner_text("#webhook-secret")
    body = json.dumps({"idempotency_key": "from-the-page"}).encode()
    assert send(url, body, signed(secret, body)).status == 202  # the old one, in its grace period
    body = json.dumps({"idempotency_key": "rotated"}).encode()
    assert send(url, body, signed(rotated, body)).status == 202
    page.reload()
    assert page.locator("#deliveries tbody tr").count() == 2
    assert violations == [] and page.console_errors == []
