"""The API's ``saturation`` key: in the schema, taken inline, refused with the form's message."""

from __future__ import annotations

import pytest

from portal.runs.models import Run
from tests.api.conftest import assert_error, inline

pytestmark = pytest.mark.django_db


@pytest.fixture
def auth(world, bearer):
    return bearer(world["users"]["member"], world["a"].project, "run")


def post(client, data, auth):
    return client.post("/api/v1/runs", data, "application/json", **auth)


def test_saturation_is_in_the_schema_and_taken_inline(client, auth):
    schemas = client.get("/api/v1/schema").json()["components"]["schemas"]
    assert "saturation" in schemas["InlineRunInRequest"]["properties"]
    assert "saturation" in schemas["ScenarioRunInRequest"]["properties"]["overrides"]["description"]
    body = inline(saturation={"arms": ["tls"], "mode": "rate", "start": 50, "max": 400, "stage_s": 1})
    response = post(client, body, auth)
    assert response.status_code == 201, response.json()
    sat = Run.objects.get(code=response.json()["id"]).config["saturation"]
    assert sat["arms"] == ["tls"] and sat["mode"] == "rate" and sat["max"] == 400.0 and sat["zoom"] == 3
    bad = assert_error(post(client, inline(saturation={"arms": ["tls_new"]}), auth), 400)
    assert "not among the run's arms" in bad["errors"]["saturation"][0]
