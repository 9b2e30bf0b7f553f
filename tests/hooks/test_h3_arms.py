"""A webhook's run takes the HTTP/3 arms as an override (issue 34, item 6), through the real portal
server and a signed call, and refuses a misspelt one with a field error."""

from __future__ import annotations

import json

import pytest

from portal.hooks import services
from portal.projects.models import personal_project
from portal.runs import starting
from portal.runs.models import Run
from tests.hooks.conftest import send, signed

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_webhook_run_takes_the_http3_arms(owner, portal_server):
    scenario = starting.save_scenario(
        personal_project(owner),
        "quic",
        {
            "plain_url": "http://127.0.0.1:9/1k",
            "tls_url": "https://127.0.0.1:9/1k",
            "users": 1,
            "duration_s": 1,
        },
    )
    trigger, secret = services.create_trigger(scenario, owner)
    url = portal_server.url(f"/hooks/{trigger.public_id}")
    arms = ["tls", "h2", "h3", "h3_new", "h3_resumed", "h3_0rtt"]
    body = json.dumps({"overrides": {"arms": arms}}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 202, answer.data
    run = Run.objects.get(code=answer.data["run_id"])
    assert [arm["name"] for arm in run.config["arms"]] == arms
    bad = json.dumps({"overrides": {"arms": ["h3", "h3_early"]}, "idempotency_key": "bad-1"}).encode()
    refused = send(url, bad, signed(secret, bad))
    assert refused.status == 400 and "h3_early" in json.dumps(refused.data)
