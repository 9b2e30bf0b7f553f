"""Webhooks: the signature checks (portal/lib/security/hooks.py), the body parser and the receiving view
(portal/hooks/receive.py) on random bodies and headers — random signatures, and valid signatures
over random bodies.

The checks: a verdict is either "ok" for a signature made with one of the secrets, or a 401 with its
reason. The body parser returns (overrides, idempotency key) or raises ValueError with a message.
``POST /hooks/<id>`` (Django's full request stack, PostgreSQL) answers 2xx or 4xx, never 5xx, always
JSON, and every 4xx carries its status and a detail.
"""

from __future__ import annotations

import json
import time

import pytest
from django.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from portal.hooks import services
from portal.hooks.models import WebhookTrigger
from portal.hooks.receive import BODY_KEYS, parse
from portal.lib.security import hooks as webhooks
from portal.projects.models import ProjectQuota, personal_project
from portal.runs import starting
from tests.fuzz.budget import count, fuzz
from tests.fuzz.strategies import JSON_VALUES, LATIN1, mostly

SECRETS = st.text(min_size=1, max_size=40)
HEADER_NAMES = st.one_of(
    st.sampled_from(
        [
            webhooks.TIMESTAMP_HEADER,
            webhooks.SIGNATURE_HEADER,
            webhooks.GITHUB_SIGNATURE_HEADER,
            webhooks.GITHUB_DELIVERY_HEADER,
            "X-GitHub-Event",
            "x-tollgate-signature",
        ]
    ),
    st.from_regex(r"\AX-[A-Za-z0-9-]{1,20}\Z"),
)
HEADERS = st.dictionaries(HEADER_NAMES, st.one_of(LATIN1, st.integers(0, 2**40).map(str)), max_size=5)
DEEP = b"[" * 50_000  # under the 64 KiB limit: reaches the parser
OVERRIDES = st.dictionaries(
    st.sampled_from([*starting.KEYS, "budgets", "callback_url", "x"]), JSON_VALUES, max_size=4
)
BODIES = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {},
        optional={"overrides": OVERRIDES | JSON_VALUES, "idempotency_key": JSON_VALUES, "x": JSON_VALUES},
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"overrides": OVERRIDES}).map(lambda v: json.dumps(v).encode()),
    st.sampled_from([DEEP, b"{" * 30_000, b"\xff\xfe{}", b"   ", b'{"overrides": {}}', b"x" * 70_000]),
)  # fmt: skip


@given(secrets=st.lists(SECRETS, min_size=1, max_size=2), headers=HEADERS, body=st.binary(max_size=200),
       now=st.floats(0, 2e10), signer=st.integers(0, 2))  # fmt: skip
@example(secrets=["s"], headers={webhooks.TIMESTAMP_HEADER: "9" * 12}, body=b"", now=0.0, signer=2)
@fuzz("webhooks.verify")
def test_a_verdict_is_ok_only_for_a_signature_made_with_a_secret(secrets, headers, body, now, signer):
    count("webhooks.verify")
    if signer < len(secrets):  # a valid signature by the current or the previous secret
        headers = {**headers, **webhooks.signed_headers(secrets[signer], body, now)}
    verdict = webhooks.verify_tollgate(secrets, headers, body, now)
    assert verdict.status in (0, 401)
    if verdict.ok:
        ts, given_signature = (
            webhooks.header(headers, "X-Tollgate-Timestamp"),
            webhooks.header(headers, "X-Tollgate-Signature"),
        )
        made = [webhooks.signature(secret, ts, body) for secret in secrets]
        assert given_signature in made and abs(now - int(ts)) <= webhooks.MAX_SKEW_S
        assert verdict.previous == (given_signature in made[1:])
    else:
        assert verdict.reason.startswith(("stale", "bad signature")) and signer >= len(secrets)
    if signer < len(secrets):
        assert webhooks.verify_tollgate(secrets, headers, body + b".", now).reason == "bad signature"
        stale = webhooks.verify_tollgate(secrets, headers, body, now + webhooks.MAX_SKEW_S + 1)
        assert stale.status == 401 and stale.reason.startswith("stale")
    github = {**headers, webhooks.GITHUB_SIGNATURE_HEADER: webhooks.github_signature(secrets[-1], body)}
    assert webhooks.verify_github(secrets, github, body).ok
    assert not webhooks.verify_github(secrets, github, body + b"x").ok
    other = webhooks.verify_github(secrets, headers, body)
    assert other.ok or (other.status == 401 and other.reason.startswith("bad signature"))


@given(body=BODIES, github=st.booleans())
@example(body=DEEP, github=False)  # was a RecursionError: a 500 to a caller holding the secret
@example(body=DEEP, github=True)
@fuzz("webhooks.body")
def test_the_body_parser_returns_overrides_and_a_key_or_says_what_is_wrong(body, github):
    count("webhooks.body")
    try:
        overrides, key = parse(body, github)
    except ValueError as exc:
        assert str(exc).endswith(".") or "JSON" in str(exc), exc
        return
    assert isinstance(overrides, dict) and isinstance(key, str) and len(key) <= 200
    if github:
        assert (overrides, key) == ({}, "")
    else:
        assert body.strip() == b"" or set(json.loads(body)) <= set(BODY_KEYS)


@pytest.fixture
def hooks(owner):
    """A Tollgate-format trigger (whose rate lets every valid delivery start a run) and a GitHub one."""
    project = personal_project(owner)
    # Counting runs is the quota's business, not this test's: valid deliveries reach the run's checks.
    ProjectQuota.objects.create(project=project, max_concurrent_runs=10**6, max_runs_per_day=10**6)
    made = {}
    for fmt in WebhookTrigger.Format:
        config = {
            "plain_url": "http://127.0.0.1:9/",
            "tls_url": "https://127.0.0.1:9/",
            "users": 1,
            "duration_s": 1,
        }
        scenario = starting.save_scenario(project, f"ci-{fmt}", config)
        trigger, secret = services.create_trigger(scenario, owner)
        WebhookTrigger.objects.filter(pk=trigger.pk).update(format=fmt, rate_per_minute=10**6)
        made[fmt] = (f"/hooks/{trigger.public_id}", secret)
    return made


def _signed_headers(fmt: str, secret: str, body: bytes, how: str) -> dict:
    if how == "none":
        return {}
    key = secret if how != "wrong-secret" else secret + "x"
    if fmt == WebhookTrigger.Format.GITHUB:
        return {webhooks.GITHUB_SIGNATURE_HEADER: webhooks.github_signature(key, body)}
    now = time.time() - (10 * webhooks.MAX_SKEW_S if how == "stale" else 0)
    return webhooks.signed_headers(key, body, now)


def signed_post(body: bytes):
    """An explicit case: ``body`` POSTed to the Tollgate-format trigger with a valid signature."""
    return example(fmt="tollgate", body=body, how="valid", headers={}, method="POST", path=None,
                   content_type="application/json")  # fmt: skip


@pytest.mark.django_db
def test_the_endpoint_answers_any_delivery_without_a_server_error(hooks):
    client = Client(raise_request_exception=False)

    @given(
        fmt=st.sampled_from(list(WebhookTrigger.Format)),
        body=BODIES,
        how=st.sampled_from(["valid", "valid", "valid", "stale", "wrong-secret", "none"]),
        headers=HEADERS,
        method=st.sampled_from(["POST"] * 8 + ["GET", "PUT"]),
        path=mostly(st.none(), st.from_regex(r"\A/hooks/[A-Za-z0-9_-]{1,40}\Z"), one_in=8),
        content_type=st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded"]),
    )
    # Were 500s: a body nested too deeply; an unknown key or an idempotency key holding NUL or a lone
    # surrogate, which the delivery log (PostgreSQL text) could not store.
    @signed_post(DEEP)
    @signed_post(b'{"\\u0000": 1}')
    @signed_post(b'{"\\ud800": 1}')
    @signed_post(b'{"idempotency_key": "a\\u0000"}')
    @fuzz("webhooks.endpoint")
    def deliver(fmt, body, how, headers, method, path, content_type):
        count("webhooks.endpoint")
        url, secret = hooks[fmt]
        sent = {**headers, **_signed_headers(fmt, secret, body, how)}
        # GitHub signs no timestamp: an old delivery's signature is as good as a new one.
        signed = how == "valid" or (how == "stale" and fmt == WebhookTrigger.Format.GITHUB)
        response = client.generic(method, path or url, data=body, content_type=content_type, headers=sent)
        assert response.status_code < 500, response.content[:300]
        assert response["Content-Type"] == "application/json", response.content[:300]
        answer = response.json()
        if response.status_code >= 400:
            assert answer["status"] == response.status_code and isinstance(answer["detail"], str)
            assert answer["detail"].strip(), answer
        else:
            assert response.status_code in (200, 202) and signed and method == "POST", answer
        if not signed and path is None and method == "POST" and len(body) <= webhooks.MAX_BODY_BYTES:
            assert response.status_code == 401, answer  # nothing past the signature check without one

    deliver()
