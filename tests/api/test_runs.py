"""Starting, listing, reading and cancelling runs through the API: the run form's validation, exactly
(limits, quotas, the outbound address policy), saved scenarios with overrides, the error shape."""

from __future__ import annotations

import pytest

from portal.audit.models import AuditEvent
from portal.projects.models import ProjectQuota
from portal.runs import reporting
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.runs.reporting import export_report
from portal.runs.starting import save_scenario
from tests.api.conftest import assert_error, inline
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def a(world):
    return world["a"]


@pytest.fixture
def auth(world, a, bearer):
    return bearer(world["users"]["member"], a.project, "run")


def post(client, path: str, data, auth):
    return client.post(path, data, "application/json", **auth)


def form_errors(project, **values) -> dict:
    """What the run page's form says about the same values (typed as in the browser)."""
    data = {
        "arms": ["plain", "tls"],
        "users": 1,
        "spawn_rate": 1,
        "warmup_s": 0,
        "duration_s": 1,
        "rounds": 1,
        "verify_tls": "",
        "follow_redirects": "on",
        "auth_type": "none",
        **values,
    }
    form = RunForm(data, project=project)
    assert not form.is_valid()
    return form.errors


def test_an_inline_run_is_created_and_queued(client, a, auth):
    response = post(client, "/api/v1/runs", inline(target_name="api"), auth)
    assert response.status_code == 201, response.json()
    body = response.json()
    run = Run.objects.get(code=body["id"])
    assert run.project == a.project and run.source == "api" and run.status == Run.Status.QUEUED
    assert response["Location"] == f"http://testserver/api/v1/runs/{run.code}"
    assert body["status"] == "queued" and body["scenario"] is None and body["target"]["name"] == "api"
    assert [arm["name"] for arm in body["config"]["arms"]] == ["plain", "tls"]
    assert body["config"]["users"] == 1 and body["config"]["duration_s"] == 1
    assert body["links"]["self"] == response["Location"]
    assert body["links"]["cancel"].endswith(f"/api/v1/runs/{run.code}/cancel")
    assert body["links"]["report_page"] == f"http://testserver/runs/{run.code}/"
    assert client.get(response["Location"], **auth).json() == body


def test_an_address_outside_the_policy_is_refused_as_the_form_refuses_it(client, a, auth):
    before = Run.objects.count()
    response = post(client, "/api/v1/runs", inline(plain="http://10.1.2.3/"), auth)
    body = assert_error(response, 400)
    expected = form_errors(a.project, plain_url="http://10.1.2.3/", tls_url="https://127.0.0.1:9/")
    assert body["errors"]["plain_url"] == expected["plain_url"]
    assert "10.1.2.3" in body["errors"]["plain_url"][0] and "TOLLGATE_ALLOW_NETWORKS" in body["detail"]
    response = post(client, "/api/v1/runs", inline(tls="https://169.254.169.254/latest/"), auth)
    assert "169.254.169.254" in assert_error(response, 400)["errors"]["tls_url"][0]
    assert Run.objects.count() == before


def test_users_above_the_projects_quota_are_a_field_error(client, a, auth):
    ProjectQuota.objects.create(project=a.project, max_users=3)
    body = assert_error(post(client, "/api/v1/runs", inline(users=4), auth), 400)
    expected = form_errors(
        a.project, plain_url="http://127.0.0.1:9/", tls_url="https://127.0.0.1:9/", users=4
    )
    assert body["errors"]["users"] == expected["users"] and "3" in body["errors"]["users"][0]
    refused = AuditEvent.objects.get(kind=AuditEvent.Kind.QUOTA_REFUSED)  # as the run page records it
    assert refused.project_id == a.project.pk and refused.actor.username == "member"
    assert post(client, "/api/v1/runs", inline(users=3), auth).status_code == 201


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({**inline(), "bogus": 1}, "bogus"),
        ({**inline(), "arms": "plain"}, "arms"),
        ({**inline(), "arms": ["plain", "quic"]}, "arms"),
        ({**inline(), "users": "many"}, "users"),
        ({**inline(), "duration_s": -1}, "duration_s"),
        ({**inline(), "users": [1]}, "users"),
        (["plain"], "non_field_errors"),
        ({"scenario": "not-a-uuid"}, "scenario"),
        ({"scenario": None}, "scenario"),
    ],
)
def test_bad_bodies_are_400_with_the_field(client, auth, data, field):
    body = assert_error(post(client, "/api/v1/runs", data, auth), 400)
    assert field in body["errors"], body


def test_malformed_json_and_wrong_media_types_are_json_errors(client, auth):
    assert_error(post(client, "/api/v1/runs", "{not json", auth), 400)
    assert_error(client.post("/api/v1/runs", "plain_url=x", "application/x-www-form-urlencoded", **auth), 415)
    assert_error(client.delete("/api/v1/runs", **auth), 405)
    assert_error(client.options("/api/v1/runs", **auth), 405)  # the schema describes the API
    assert_error(client.get("/api/v1/nothing/here", **auth), 404)


def test_a_run_from_a_saved_scenario_records_its_version(client, world, a, auth):
    scenario = save_scenario(a.project, a.scenario.name, inline("http://127.0.0.1:9/v2"), scenario=a.scenario)
    assert scenario.version == 2
    data = {"scenario": str(scenario.code), "overrides": {"duration_s": 2, "arms": ["tls"]}}
    response = post(client, "/api/v1/runs", data, auth)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["scenario"] == {"id": str(scenario.code), "version": 2}
    run = Run.objects.get(code=body["id"])
    assert run.scenario == scenario and run.scenario_version == 2 and run.target == scenario.target
    assert run.config["duration_s"] == 2 and run.arm_names == ["tls"]
    assert run.config["users"] == 1  # the scenario's own value, not overridden


def test_an_absurd_rate_is_a_field_error_not_a_server_error(client, a, auth):
    body = assert_error(post(client, "/api/v1/runs", inline(arrival_rate=1e308), auth), 400)
    assert "req/s" in body["errors"]["arrival_rate"][0]
    data = {"scenario": str(a.scenario.code), "overrides": {"arrival_rate": 1e308}}
    assert "arrival_rate" in assert_error(post(client, "/api/v1/runs", data, auth), 400)["errors"]


def test_budgets_inline_and_as_an_override_are_in_the_schema_and_the_messages(client, a, auth):
    """A CI job gives a run budgets through the API as ``tollgate run --budget`` does: the schema
    describes them, an inline body and a scenario's overrides take them, and the messages that list
    the accepted keys name them."""
    schemas = client.get("/api/v1/schema").json()["components"]["schemas"]
    assert "budgets" in schemas["InlineRunInRequest"]["properties"]
    assert "budgets" in schemas["ScenarioRunInRequest"]["properties"]["overrides"]["description"]
    response = post(client, "/api/v1/runs", inline(budgets={"keepalive_tls_p50_ms": 2}), auth)
    assert response.status_code == 201, response.json()
    assert Run.objects.get(code=response.json()["id"]).config["budgets"] == {"keepalive_tls_p50_ms": 2}
    data = {"scenario": str(a.scenario.code), "overrides": {"budgets": {"failed_checks": 0}}}
    response = post(client, "/api/v1/runs", data, auth)
    assert response.status_code == 201, response.json()
    assert Run.objects.get(code=response.json()["id"]).config["budgets"] == {"failed_checks": 0}
    body = assert_error(post(client, "/api/v1/runs", inline(budget={"handshake_ms": 1}), auth), 400)
    assert "budgets" in body["errors"]["budget"][0]
    data = {"scenario": str(a.scenario.code), "overrides": {"budget": {}}}
    body = assert_error(post(client, "/api/v1/runs", data, auth), 400)
    assert "budgets" in body["errors"]["budget"][0]


def test_the_tls_matrix_and_wan_rtts_are_in_the_schema_and_taken_inline(client, a, auth):
    schemas = client.get("/api/v1/schema").json()["components"]["schemas"]
    for key in ("tls_matrix", "wan_rtt_ms"):
        assert key in schemas["InlineRunInRequest"]["properties"]
        assert key in schemas["ScenarioRunInRequest"]["properties"]["overrides"]["description"]
    body = inline(arms=["plain_new", "tls_new"], tls_matrix="protocol, cert", wan_rtt_ms=[200, 2])
    response = post(client, "/api/v1/runs", body, auth)
    assert response.status_code == 201, response.json()
    run = Run.objects.get(code=response.json()["id"])
    assert run.config["tls_matrix"] == ["protocol", "cert"] and run.config["wan_rtt_ms"] == [2.0, 200.0]
    bad = assert_error(
        post(client, "/api/v1/runs", inline(tls_matrix=["protocol"], wan_rtt_ms="x"), auth), 400
    )
    assert "tls_new" in bad["errors"]["tls_matrix"][0] and "milliseconds" in bad["errors"]["wan_rtt_ms"][0]


def test_a_scenario_refuses_what_it_may_not_override_and_other_projects_scenarios(client, world, a, auth):
    code = str(a.scenario.code)
    body = assert_error(
        post(client, "/api/v1/runs", {"scenario": code, "overrides": {"plain_url": "x"}}, auth), 400
    )
    assert "overridable" in body["errors"]["plain_url"][0]
    body = assert_error(post(client, "/api/v1/runs", {"scenario": code, "users": 2}, auth), 400)
    assert "users" in body["errors"]
    body = assert_error(post(client, "/api/v1/runs", {"scenario": code, "overrides": [1]}, auth), 400)
    assert "overrides" in body["errors"]
    other = str(world["b"].scenario.code)
    body = assert_error(post(client, "/api/v1/runs", {"scenario": other}, auth), 400)
    assert body["errors"] == {"scenario": ["No such scenario in this project."]}


def test_the_list_is_newest_first_filtered_and_paginated(client, a, auth):
    queued = Run.objects.get(code=post(client, "/api/v1/runs", inline(), auth).json()["id"])
    body = client.get("/api/v1/runs", **auth).json()
    assert body["count"] == 3 and body["results"][0]["id"] == str(queued.code)
    assert [r["id"] for r in client.get("/api/v1/runs?status=queued", **auth).json()["results"]] == [
        str(queued.code)
    ]
    assert client.get("/api/v1/runs?status=succeeded", **auth).json()["count"] == 2
    page = client.get("/api/v1/runs?page_size=1&page=2", **auth).json()
    assert len(page["results"]) == 1 and page["next"] and page["previous"]
    assert "status" in assert_error(client.get("/api/v1/runs?status=done", **auth), 400)["errors"]
    assert_error(client.get("/api/v1/runs?page=99", **auth), 404)


def test_the_list_costs_four_queries_however_many_runs(client, world, a, auth, django_assert_num_queries):
    for _ in range(5):
        make_run(world["users"]["owner"], project=a.project, target_name="more")
    client.get("/api/v1/runs", **auth)  # the token's last use is written once; not counted below
    # The token (with user and project), the user's role in its project, the count, one page of
    # runs with their targets and scenarios.
    with django_assert_num_queries(4):
        body = client.get("/api/v1/runs", **auth).json()
    assert body["count"] == 7 and len(body["results"]) == 7


def test_the_report_is_the_exported_report(client, a, auth, rf):
    run = a.runs[0]
    body = client.get(f"/api/v1/runs/{run.code}/report", **auth).json()
    assert body == export_report(run, rf.get("/", SERVER_NAME="testserver"))
    assert body["run"]["id"] == str(run.code) and set(body["arms"]) == {"plain", "tls", "tls_new"}
    queued = post(client, "/api/v1/runs", inline(), auth).json()
    report = client.get(f"/api/v1/runs/{queued['id']}/report", **auth)  # nothing measured yet
    assert report.status_code == 200 and report.json()["run"]["status"] == "queued"


def test_cancel_as_the_web_cancel(client, a, auth):
    queued = Run.objects.get(code=post(client, "/api/v1/runs", inline(), auth).json()["id"])
    response = post(client, f"/api/v1/runs/{queued.code}/cancel", {}, auth)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    queued.refresh_from_db()
    assert queued.status == Run.Status.CANCELLED and queued.finished is not None
    running = a.runs[1]
    Run.objects.filter(pk=running.pk).update(status=Run.Status.RUNNING, finished=None)
    response = post(client, f"/api/v1/runs/{running.code}/cancel", {}, auth)
    assert response.status_code == 202 and response.json()["status"] == "running"
    assert Run.objects.get(pk=running.pk).cancel_requested
    body = assert_error(post(client, f"/api/v1/runs/{a.runs[0].code}/cancel", {}, auth), 409)
    assert body["run_status"] == "succeeded" and "succeeded" in body["detail"]
    assert Run.objects.get(pk=a.runs[0].pk).status == Run.Status.SUCCEEDED


def test_a_share_link_is_created(client, a, auth):
    run = a.runs[0]
    response = post(client, f"/api/v1/runs/{run.code}/shares", {"days": 7, "note": "Q3 audit"}, auth)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert set(body) == {"id", "url", "expires_at"} and "/s/" in body["url"]
    assert client.get(body["url"].replace("http://testserver", "")).status_code == 200
    assert (
        "days"
        in assert_error(post(client, f"/api/v1/runs/{run.code}/shares", {"days": 0}, auth), 400)["errors"]
    )
    assert (
        "days"
        in assert_error(post(client, f"/api/v1/runs/{run.code}/shares", {"days": 10**6}, auth), 400)["errors"]
    )


def test_a_bug_is_a_json_500_without_its_traceback(client, a, auth, monkeypatch, caplog):
    def broken(run, request=None):
        raise RuntimeError("secret detail of a bug")

    # A defect injected where the report is built: the only way to make a correct API fail.
    monkeypatch.setattr(reporting, "export_report", broken)
    response = client.get(f"/api/v1/runs/{a.runs[0].code}/report", **auth)
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json() == {
        "status": 500,
        "errors": {},
        "detail": "Internal error: it is logged; try again or tell the operator.",
    }
    assert "secret detail" not in response.content.decode()
    assert "secret detail of a bug" in caplog.text  # the operator's log has it
