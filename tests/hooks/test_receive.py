"""POST /hooks/<id> over the real HTTP stack (Gunicorn, on the test database) with real HMACs.

No worker here: the runs the webhook starts stay queued (tests/hooks/test_end_to_end.py runs them).
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from portal.hooks import services
from portal.hooks.models import WebhookDelivery, WebhookTrigger
from portal.lib.security import hooks as webhooks
from portal.projects.models import Membership, Project, Role, personal_project
from portal.runs import starting
from portal.runs.models import Run
from tests.hooks.conftest import send, signed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook(owner, portal_server):
    scenario = starting.save_scenario(
        personal_project(owner),
        "ci",
        {
            "plain_url": "http://127.0.0.1:9/1k",
            "tls_url": "https://127.0.0.1:9/1k",
            "users": 1,
            "duration_s": 1,
        },
    )
    trigger, secret = services.create_trigger(scenario, owner)
    return trigger, secret, portal_server.url(f"/hooks/{trigger.public_id}")


def outcomes(trigger) -> list[tuple[int, str]]:
    return list(
        WebhookDelivery.objects.filter(trigger=trigger).order_by("pk").values_list("status_code", "outcome")
    )


def test_a_signed_call_starts_a_run_and_says_where_to_follow_it(hook):
    trigger, secret, url = hook
    body = json.dumps({"overrides": {"users": 2, "duration_s": 2}}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 202, answer.data
    assert set(answer.data) == {"run_id", "run_url", "status_url", "report_url", "share_url"}
    run = Run.objects.get(code=answer.data["run_id"])
    assert (run.source, run.status, run.owner_id, run.scenario_id) == (
        "webhook",
        "queued",
        trigger.created_by_id,
        trigger.scenario_id,
    )
    assert run.config["users"] == 2 and run.config["duration_s"] == 2
    assert answer.data["run_url"].endswith(f"/runs/{run.code}/")
    assert answer.data["status_url"].startswith("http://127.0.0.1:") and "/s/" in answer.data["status_url"]
    [row] = WebhookDelivery.objects.filter(trigger=trigger)
    assert (row.status_code, row.outcome, row.run_id, row.body_bytes) == (202, "started", run.pk, len(body))
    assert row.ip == "127.0.0.0/24" and len(row.signature_digest) == 64


def test_budgets_go_in_the_overrides_and_replace_the_scenarios(hook):
    """docs/ci.md and docs/budgets.md: a webhook's run takes its budgets inside ``overrides``; a
    top-level ``budgets`` key is no part of the body."""
    trigger, secret, url = hook
    body = json.dumps({"overrides": {"budgets": {"handshake_ms": 5, "failed_checks": 0}}}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 202, answer.data
    run = Run.objects.get(code=answer.data["run_id"])
    assert run.config["budgets"] == {"handshake_ms": 5, "failed_checks": 0}
    bad = json.dumps({"overrides": {"budgets": {"handshake_ms": "fast"}}}).encode()
    refused = send(url, bad, signed(secret, bad))
    assert refused.status == 400 and list(refused.data["errors"]) == ["budgets"]


def test_forged_stale_and_malformed_calls_are_refused_and_logged(hook):
    trigger, secret, url = hook
    body = b'{"idempotency_key": "build-1"}'
    now = int(time.time())
    wrong = send(url, body, signed("whsec_not-the-secret", body))
    stale = send(url, body, signed(secret, body, now - webhooks.MAX_SKEW_S - 5))
    future = send(url, body, signed(secret, body, now + webhooks.MAX_SKEW_S + 5))
    no_time = send(url, body, {webhooks.SIGNATURE_HEADER: webhooks.signature(secret, now, body)})
    text_time = send(url, body, {**signed(secret, body), webhooks.TIMESTAMP_HEADER: "yesterday"})
    # The timestamp is inside the MAC: a fresh timestamp on an old signature does not verify.
    moved = send(url, body, {**signed(secret, body, now - 10), webhooks.TIMESTAMP_HEADER: str(now)})
    assert [a.status for a in (wrong, stale, future, no_time, text_time, moved)] == [401] * 6
    assert wrong.data["detail"] == "bad signature" and stale.data["detail"].startswith("stale")
    assert set(wrong.data) == {"status", "errors", "detail"} and wrong.data["status"] == 401
    malformed = b'{"overrides": {"users": 2'
    bad_json = send(url, malformed, signed(secret, malformed))
    assert bad_json.status == 400 and "not JSON" in bad_json.data["detail"]
    unknown = b'{"users": 2}'
    assert send(url, unknown, signed(secret, unknown)).status == 400
    assert Run.objects.count() == 0
    logged = outcomes(trigger)
    assert [code for code, _ in logged] == [401] * 6 + [400, 400]
    assert logged[0][1] == "bad signature"


def test_overrides_outside_limits_are_400_with_field_errors(hook, settings):
    _, secret, url = hook
    body = json.dumps({"overrides": {"users": 10**7, "plain_url": "http://127.0.0.1:1/"}}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 400
    assert set(answer.data["errors"]) == {"plain_url"}  # not overridable on a saved scenario
    body = json.dumps({"overrides": {"users": 10**7}}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 400 and answer.data["errors"]["users"], answer.data
    assert Run.objects.count() == 0
    # The delivery log (webhook page, `tollgate webhook deliveries`) says which field and why.
    last = WebhookDelivery.objects.order_by("-pk").first()
    assert last.outcome.startswith("The run was refused; see errors. users: At most"), last.outcome


def test_a_replay_is_409_and_a_repeated_key_gets_the_first_run(hook):
    trigger, secret, url = hook
    body = b'{"idempotency_key": "deploy-42"}'
    now = int(time.time())
    first = send(url, body, signed(secret, body, now))
    assert first.status == 202
    replay = send(url, body, signed(secret, body, now))  # the same bytes, the same signature
    assert replay.status == 409 and "Replayed" in replay.data["detail"]
    repeat = send(url, body, signed(secret, body, now - 1))  # re-signed: a meant repeat
    assert repeat.status == 200 and repeat.data == first.data
    other = b'{"idempotency_key": "deploy-43"}'
    assert send(url, other, signed(secret, other, now)).status == 202
    assert Run.objects.count() == 2
    assert [code for code, _ in outcomes(trigger)] == [202, 409, 200, 202]
    assert WebhookDelivery.objects.get(status_code=200).run.code == uuid.UUID(first.data["run_id"])


def test_a_body_over_64_kb_is_413_and_not_read(hook):
    trigger, secret, url = hook
    body = json.dumps({"idempotency_key": "x" * webhooks.MAX_BODY_BYTES}).encode()
    answer = send(url, body, signed(secret, body))
    assert answer.status == 413
    just = b" " * (webhooks.MAX_BODY_BYTES - 2) + b"{}"  # exactly the limit: accepted
    assert send(url, just, signed(secret, just)).status == 202
    assert [code for code, _ in outcomes(trigger)] == [413, 202]


def send_chunked(url: str, body: bytes, headers: dict) -> tuple[int, dict]:
    """POST ``body`` with ``Transfer-Encoding: chunked`` and no Content-Length (curl reading stdin,
    many CI tools): 16 KiB chunks."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        chunks = (body[i : i + 16384] for i in range(0, len(body), 16384))
        conn.request("POST", parts.path, body=chunks, encode_chunked=True,
                     headers={"Content-Type": "application/json", **headers})  # fmt: skip
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_a_chunked_body_is_read_with_the_same_cap(hook):
    """No Content-Length: the body is read as sent (Gunicorn takes the chunks apart), up to the cap."""
    trigger, secret, url = hook
    body = json.dumps({"overrides": {"users": 2}, "idempotency_key": "chunked-1"}).encode()
    status, data = send_chunked(url, body, signed(secret, body))
    assert status == 202, data
    assert Run.objects.get(code=data["run_id"]).config["users"] == 2
    big = json.dumps({"idempotency_key": "x" * 70 * 1024}).encode()  # 70 KB
    status, data = send_chunked(url, big, signed(secret, big))
    assert status == 413, data
    just = b" " * (webhooks.MAX_BODY_BYTES - 2) + b"{}"  # exactly the limit: accepted
    assert send_chunked(url, just, signed(secret, just))[0] == 202
    forged = b'{"overrides": {"users": 3}}'
    assert send_chunked(url, forged, signed(secret, body))[0] == 401  # signed for another body
    assert [code for code, _ in outcomes(trigger)] == [202, 413, 202, 401]


def test_over_the_rate_is_429_with_retry_after(hook):
    trigger, secret, url = hook
    WebhookTrigger.objects.filter(pk=trigger.pk).update(rate_per_minute=2)
    answers = []
    for n in range(3):
        body = json.dumps({"idempotency_key": f"k{n}"}).encode()
        answers.append(send(url, body, signed(secret, body)))
    assert [a.status for a in answers] == [202, 202, 429]
    assert 1 <= int(answers[2].headers["Retry-After"]) <= 60
    assert Run.objects.count() == 2
    # The window moves on: deliveries older than a minute no longer count.
    WebhookDelivery.objects.update(received_at=timezone.now() - timedelta(seconds=61))
    body = b'{"idempotency_key": "k3"}'
    assert send(url, body, signed(secret, body)).status == 202


def test_after_a_rotation_both_secrets_verify_until_the_grace_period_ends(hook):
    trigger, old, url = hook
    new = services.rotate(trigger)
    assert new != old
    for n, secret in enumerate((old, new)):
        body = json.dumps({"idempotency_key": f"r{n}"}).encode()
        assert send(url, body, signed(secret, body)).status == 202
    WebhookTrigger.objects.filter(pk=trigger.pk).update(
        previous_valid_until=timezone.now() - timedelta(seconds=1)
    )
    body = b'{"idempotency_key": "r2"}'
    assert send(url, body, signed(old, body)).status == 401
    assert send(url, body, signed(new, body)).status == 202


def test_github_format(hook):
    trigger, secret, url = hook
    WebhookTrigger.objects.filter(pk=trigger.pk).update(format=WebhookTrigger.Format.GITHUB)
    body = json.dumps({"ref": "refs/heads/main", "after": "0" * 40}).encode()
    delivery = str(uuid.uuid4())

    def github(body: bytes, delivery: str, secret: str = secret):
        headers = {
            webhooks.GITHUB_SIGNATURE_HEADER: webhooks.github_signature(secret, body),
            webhooks.GITHUB_DELIVERY_HEADER: delivery,
            "X-GitHub-Event": "push",
        }
        return send(url, body, headers)

    ping = send(
        url,
        b'{"zen": "Keep it logically awesome."}',
        {
            webhooks.GITHUB_SIGNATURE_HEADER: webhooks.github_signature(
                secret, b'{"zen": "Keep it logically awesome."}'
            ),
            webhooks.GITHUB_DELIVERY_HEADER: str(uuid.uuid4()),
            "X-GitHub-Event": "ping",
        },
    )
    assert ping.status == 200 and ping.data["detail"] == "pong" and Run.objects.count() == 0
    first = github(body, delivery)
    assert first.status == 202, first.data
    redelivered = github(body, delivery)  # GitHub's "Redeliver": same id, same body
    assert redelivered.status == 200 and redelivered.data["run_id"] == first.data["run_id"]
    assert github(body, str(uuid.uuid4())).status == 409  # the same signed body under a new id
    assert github(body, str(uuid.uuid4()), "whsec_wrong").status == 401
    tollgate = send(url, body, signed(secret, body))  # Tollgate's headers on a GitHub trigger
    assert tollgate.status == 401
    assert Run.objects.count() == 1


def test_unknown_disabled_and_orphaned_webhooks(hook, django_user_model):
    trigger, secret, url = hook
    body = b"{}"
    unknown = ("y" if trigger.public_id[0] == "x" else "x") + trigger.public_id[1:]  # never the same id
    assert send(url.replace(trigger.public_id, unknown), body, signed(secret, body)).status == 404
    assert send(url, b"", method="GET").status == 405
    # Text no public id holds (a NUL PostgreSQL cannot compare, non-ASCII, too long): unknown too.
    base = url.rsplit("/", 1)[0]
    for odd in ("%00", trigger.public_id + "%00", "%C3%A9", "x" * 65):
        answer = send(f"{base}/{odd}", body, signed(secret, body))
        assert answer.status == 404 and answer.data["detail"] == "No such webhook.", odd
    WebhookTrigger.objects.filter(pk=trigger.pk).update(enabled=False)
    assert send(url, body, signed(secret, body)).status == 403
    WebhookTrigger.objects.filter(pk=trigger.pk).update(enabled=True)
    # The creator left the project: the runs would belong to a non-member.
    project = Project.objects.create(name="team")
    member = django_user_model.objects.create_user("member", password="member-pass-123")
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    scenario = trigger.scenario
    scenario.project = project
    scenario.save()
    scenario.target.project = project
    scenario.target.save()
    WebhookTrigger.objects.filter(pk=trigger.pk).update(created_by=member)
    Membership.objects.filter(user=member).update(role=Role.VIEWER)
    answer = send(url, body, signed(secret, body))
    assert answer.status == 403 and "no longer" in answer.data["detail"]
    assert Run.objects.count() == 0
    assert [code for code, _ in outcomes(trigger)] == [405, 403, 403]


def test_concurrent_deliveries_take_turns(hook):
    trigger, secret, url = hook
    WebhookTrigger.objects.filter(pk=trigger.pk).update(rate_per_minute=2)
    body = b'{"idempotency_key": "same"}'
    same = signed(secret, body)
    with ThreadPoolExecutor(4) as pool:
        replays = list(pool.map(lambda _: send(url, body, same).status, range(4)))
    assert sorted(replays) == [202, 409, 409, 409]
    bodies = [json.dumps({"idempotency_key": f"c{n}"}).encode() for n in range(5)]
    with ThreadPoolExecutor(5) as pool:
        statuses = list(pool.map(lambda b: send(url, b, signed(secret, b)).status, bodies))
    assert sorted(statuses) == [202, 429, 429, 429, 429]  # the rate is 2 a minute: one left
    assert Run.objects.count() == 2
