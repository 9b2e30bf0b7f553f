"""The four HTTP/3 arms through the API (issue 34, item 6): an inline run and a saved scenario's run with
the arms as an override take them by name, in the engine config as asked; a misspelt one is refused."""

from __future__ import annotations

import pytest

from portal.runs.models import Run
from portal.runs.starting import save_scenario
from tests.api.conftest import inline

pytestmark = pytest.mark.django_db
H3 = ["tls", "h2", "h3", "h3_new", "h3_resumed", "h3_0rtt"]


@pytest.fixture
def auth(world, bearer):
    return bearer(world["users"]["member"], world["a"].project, "run")


def test_an_inline_run_takes_the_http3_arms(client, auth):
    response = client.post("/api/v1/runs", inline(arms=H3), "application/json", **auth)
    assert response.status_code == 201, response.json()
    run = Run.objects.get(code=response.json()["id"])
    assert [arm["name"] for arm in run.config["arms"]] == H3
    # Each HTTP/3 arm is measured at the TLS URL (its UDP side).
    assert {arm["url"] for arm in run.config["arms"] if arm["name"].startswith("h3")} == {
        "https://127.0.0.1:9/"
    }


def test_a_misspelt_http3_arm_is_refused_by_name(client, auth):
    response = client.post("/api/v1/runs", inline(arms=["tls", "h3_zerortt"]), "application/json", **auth)
    assert response.status_code == 400 and "h3_zerortt" in str(response.json())


def test_a_scenario_run_overrides_its_arms_with_the_http3_ones(client, world, auth):
    scenario = save_scenario(
        world["a"].project,
        "quic",
        {"plain_url": "http://127.0.0.1:9/", "tls_url": "https://127.0.0.1:9/", "users": 1, "duration_s": 1},
    )
    body = {"scenario": str(scenario.code), "overrides": {"arms": ["h3_new", "h3_resumed", "h3_0rtt"]}}
    response = client.post("/api/v1/runs", body, "application/json", **auth)
    assert response.status_code == 201, response.json()
    run = Run.objects.get(code=response.json()["id"])
    assert [arm["name"] for arm in run.config["arms"]] == ["h3_new", "h3_resumed", "h3_0rtt"]
