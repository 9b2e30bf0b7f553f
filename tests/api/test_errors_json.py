"""The API and the webhooks answer JSON in their error shape even where Django refuses a request
before any view of theirs runs: a Host header it does not accept (DisallowedHost, a 400 of its own)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("path", ["/api/v1/runs", "/hooks/00000000-0000-0000-0000-000000000000/"])
def test_a_refused_host_gets_a_json_400_on_the_api_and_the_hooks(client, path):
    answer = client.post(path, b"{}", content_type="application/json", HTTP_HOST="c>-Ecp[")
    assert answer.status_code == 400 and answer["Content-Type"] == "application/json"
    assert answer.json() == {"status": 400, "errors": {}, "detail": "The request could not be understood."}


def test_the_web_pages_keep_their_html_400(client):
    answer = client.get("/runs/", HTTP_HOST="c>-Ecp[")
    assert answer.status_code == 400 and answer["Content-Type"].startswith("text/html")
    assert "Bad request" in answer.content.decode()
