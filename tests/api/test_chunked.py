"""A request body sent chunked (no Content-Length: curl reading stdin, many CI tools) reaches the API
whole, over the real HTTP stack (Gunicorn on the test database): Django alone would read it as empty."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

from portal.api import tokens
from portal.projects.models import Membership, Project, Role
from tests.api.conftest import inline
from tests.hooks.conftest import portal_server  # noqa: F401 - the module's Gunicorn

pytestmark = pytest.mark.django_db(transaction=True)


def post_chunked(url: str, body: bytes, token: str) -> tuple[int, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        chunks = (body[i : i + 1000] for i in range(0, len(body), 1000))
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        conn.request("POST", parts.path, body=chunks, encode_chunked=True, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_a_chunked_run_body_is_read_whole_and_an_oversized_one_is_413(portal_server, django_user_model):  # noqa: F811
    user = django_user_model.objects.create_user("chunky", password="chunky-pass-123")
    project = Project.objects.create(name="chunks")
    Membership.objects.create(project=project, user=user, role=Role.OWNER)
    _, token = tokens.issue(user, project, scope="run", name="ci")
    url = portal_server.url("/api/v1/runs")
    # The body's own field is judged: only a body read whole can name `users`.
    status, data = post_chunked(url, json.dumps(inline(users=0)).encode(), token)
    assert status == 400 and "users" in data["errors"], data
    # Padded past a chunk boundary with whitespace, a valid body starts the run.
    body = json.dumps(inline(users=1)).encode() + b" " * 5000
    status, data = post_chunked(url, body, token)
    assert status == 201 and data["config"]["users"] == 1, data
    status, data = post_chunked(url, b" " * 3_000_000, token)
    assert status == 413 and "larger than" in data["detail"], data
