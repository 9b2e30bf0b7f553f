"""The JSON API below its schema: what schemathesis (tests/api/test_schema.py, whose case count follows
the same fuzz mode) does not send — raw bodies that are not JSON, JSON nested too deep, any content
type, any Authorization header, any path under /api/v1/.

Every answer is JSON in the API's one error shape when it refuses (``{"status", "errors", "detail"}``
with the status repeated and a detail), never a 5xx.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from django.test import Client
from hypothesis import example, given
from hypothesis import strategies as st

from portal.projects.models import ProjectQuota
from tests.api.conftest import inline
from tests.fuzz.budget import count, fuzz
from tests.fuzz.strategies import JSON_VALUES, LATIN1, mostly

DEEP = b"[" * 100_000
SURROGATE_KEY = b'{"\\ud800": 1}'
JSON = "application/json"
RUN_KEYS = st.sampled_from([*inline(), "scenario", "budgets", "callback_url", "x"])
BODIES = st.one_of(
    st.binary(max_size=300),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.dictionaries(RUN_KEYS, JSON_VALUES, max_size=4).map(
        lambda changes: json.dumps({**inline(), **changes}).encode()
    ),
    st.sampled_from([DEEP, b'{"a":' * 50_000, b"\xff\xfe", b"NaN", b'{"users": 1e999}', b""]),
)
# Percent-encoded text: any character reaches the URL resolver (the test client would drop a raw newline).
IDS = st.one_of(
    st.uuids().map(str),
    st.from_regex(r"\A[A-Za-z0-9._-]{0,40}\Z"),
    st.text(max_size=20).map(lambda text: quote(text, safe="")),
)
OTHER_PATHS = st.one_of(
    st.sampled_from(["/api/v1/runs", "/api/v1/targets", "/api/v1/scenarios", "/api/v1/tokens"]),
    st.builds("/api/v1/runs/{}".format, IDS),
    st.builds("/api/v1/runs/{}/{}".format, IDS, st.sampled_from(["cancel", "shares", "report", "x"])),
    st.from_regex(r"\A/api/v1/[A-Za-z0-9._/-]{0,40}\Z"),
)
PATHS = mostly(st.just("/api/v1/runs"), OTHER_PATHS)  # the one that parses bodies: most of the cases
CONTENT_TYPES = st.one_of(
    st.sampled_from(
        ["application/json", "application/json; charset=latin-1", "text/plain", "multipart/form-data"]
    ),
    LATIN1,
)


@pytest.mark.django_db
def test_the_api_answers_raw_requests_in_its_error_shape(world, bearer):
    a = world["a"]
    # Counting runs is the quota's business: created runs must not turn every later case into a refusal.
    ProjectQuota.objects.create(project=a.project, max_concurrent_runs=10**6, max_runs_per_day=10**6)
    tokens = {
        "run": bearer(world["users"]["member"], a.project, "run")["HTTP_AUTHORIZATION"],
        "read": bearer(world["users"]["viewer"], a.project, "read")["HTTP_AUTHORIZATION"],
    }
    client = Client(raise_request_exception=False)
    auth = mostly(
        st.sampled_from(["run", "run", "read"]).map(tokens.get),
        st.one_of(
            st.none(),
            st.builds("Bearer {}".format, LATIN1),
            st.sampled_from(["Bearer", "Bearer a b", "Basic dXNlcjpwYXNz", "bearer tg_" + "x" * 40]),
            LATIN1,
        ),
    )

    @given(
        method=st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "PATCH"]),
        path=PATHS,
        authorization=auth,
        body=BODIES,
        content_type=CONTENT_TYPES,
    )
    # Were 500s: a body nested too deeply (DRF's parser let RecursionError through), an unknown key
    # named "\ud800" (echoed in the error, which the renderer could not encode); and an HTML 404 for a
    # newline in the path (the catch-all's "." did not match it; found by schemathesis in long mode).
    @example(method="POST", path="/api/v1/runs", authorization=tokens["run"], body=DEEP, content_type=JSON)
    @example(
        method="POST", path="/api/v1/runs", authorization=tokens["run"], body=SURROGATE_KEY, content_type=JSON
    )
    @example(
        method="GET",
        path="/api/v1/runs/a%0Ab/report",
        authorization=tokens["read"],
        body=b"",
        content_type="",
    )
    @fuzz("api.raw")
    def call(method, path, authorization, body, content_type):
        count("api.raw")
        headers = {"Authorization": authorization} if authorization is not None else {}
        response = client.generic(method, path, data=body, content_type=content_type, headers=headers)
        assert response.status_code < 500, response.content[:500]
        assert response["Content-Type"].startswith("application/json"), response.content[:300]
        answer = json.loads(response.content)
        if response.status_code >= 400:
            assert answer["status"] == response.status_code, answer
            assert isinstance(answer["detail"], str) and answer["detail"].strip(), answer
            assert isinstance(answer["errors"], dict), answer

    call()
