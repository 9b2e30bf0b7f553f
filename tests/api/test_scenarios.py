"""Saving scenarios through the API: a new one (POST), a change (PATCH: a new version, what the body
leaves out kept), and its regression tolerance with the scenario page's bounds and words; a run
judged afterwards is judged with the tolerance the API set."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal import vault
from portal.audit.models import AuditEvent
from portal.judgements.services import judge_run
from portal.lib.watching import judgements as judge
from portal.runs import services
from portal.runs.models import Run
from portal.runs.starting import save_scenario
from portal.scenarios.models import Scenario
from tests.api.conftest import assert_error, inline
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def a(world):
    return world["a"]


@pytest.fixture
def auth(world, a, bearer):
    return bearer(world["users"]["member"], a.project, "run")


def post(client, data, auth):
    return client.post("/api/v1/scenarios", data, "application/json", **auth)


def patch(client, scenario, data, auth):
    return client.patch(f"/api/v1/scenarios/{scenario.code}", data, "application/json", **auth)


@pytest.mark.parametrize(("sent", "stored"), [(None, 10.0), (0, 0.0), (25.5, 25.5), (1000, 1000.0)])
def test_a_scenario_is_saved_with_its_tolerance(client, a, auth, sent, stored):
    extra = {} if sent is None else {"tolerance_pct": sent}
    response = post(client, {"name": "api nightly", **inline(), **extra}, auth)
    assert response.status_code == 201, response.json()
    body = response.json()
    scenario = Scenario.objects.get(code=body["id"])
    assert scenario.project == a.project and scenario.tolerance_pct == stored
    assert response["Location"] == f"http://testserver/api/v1/scenarios/{scenario.code}"
    assert (body["name"], body["version"], body["tolerance_pct"]) == ("api nightly", 1, stored)
    assert client.get(response["Location"], **auth).json() == body
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SCENARIO_CHANGED)
    assert event.detail["tolerance_pct"] == stored and event.detail["previous_version"] is None
    assert event.detail["via"] == "api" and event.project_id == a.project.pk


@pytest.mark.parametrize("sent", [-1, 1000.5, 10**6, "10", True, None, [10]])
def test_a_tolerance_out_of_bounds_is_a_400_under_its_key_and_nothing_is_saved(client, a, auth, sent):
    before = (a.scenario.version, a.scenario.tolerance_pct)
    for response in (
        post(client, {"name": "api nightly", **inline(), "tolerance_pct": sent}, auth),
        patch(client, a.scenario, {"tolerance_pct": sent}, auth),
    ):
        body = assert_error(response, 400)
        assert body["errors"] == {"tolerance_pct": [judge.TOLERANCE_ERROR]}
    assert not Scenario.objects.filter(name="api nightly").exists()
    a.scenario.refresh_from_db()
    assert (a.scenario.version, a.scenario.tolerance_pct) == before


def test_the_scenario_page_says_the_same_about_a_tolerance_out_of_bounds(client, world, a):
    """The words of the API are the edit page's (and the CLI's, tests/schedules/test_interfaces.py)."""
    client.force_login(world["users"]["member"])
    config = a.scenario.config
    data = {
        "name": a.scenario.name,
        "plain_url": config["plain_url"],
        "tls_url": config["tls_url"],
        "arms": config["arms"],
        "users": 1,
        "spawn_rate": 1,
        "warmup_s": 0,
        "duration_s": 1,
        "auth_type": "none",
    }
    for sent in ("-1", "1000.5", "ten"):
        page = client.post(reverse("scenarios-edit", args=[a.scenario.code]), {**data, "tolerance_pct": sent})
        assert page.status_code == 200 and judge.TOLERANCE_ERROR in page.content.decode(), sent
    response = client.post(
        reverse("scenarios-edit", args=[a.scenario.code]), {**data, "tolerance_pct": "1000"}
    )
    assert response.status_code == 302
    a.scenario.refresh_from_db()
    assert a.scenario.tolerance_pct == 1000.0


def test_a_change_keeps_what_it_leaves_out_and_is_a_new_version(client, a, auth):
    scenario = save_scenario(
        a.project,
        "secret",
        {
            **inline(),
            "arms": ["tls"],
            "auth": {"type": "bearer", "secret": "tok-4711"},
            "budgets": {"failed_checks": 0},
        },
    )
    response = patch(client, scenario, {"tolerance_pct": 2.5}, auth)
    assert response.status_code == 200, response.json()
    assert (response.json()["version"], response.json()["tolerance_pct"]) == (2, 2.5)
    changed = Scenario.objects.get(pk=scenario.pk)
    assert changed.config == {**scenario.config, "secrets": changed.config["secrets"]}
    assert vault.unseal(changed.config["secrets"])["auth"]["secret"] == "tok-4711"
    assert changed.budgets == {"failed_checks": 0} and changed.name == "secret"
    # Other keys, and a new name; the tolerance stays.
    response = patch(client, scenario, {"name": "renamed", "users": 3, "budgets": {}}, auth)
    assert response.status_code == 200, response.json()
    changed.refresh_from_db()
    assert (changed.name, changed.version, changed.config["users"]) == ("renamed", 3, 3)
    assert changed.budgets == {} and changed.tolerance_pct == 2.5


def test_names_and_run_keys_are_checked_as_the_pages_check_them(client, a, auth):
    taken = assert_error(post(client, {"name": a.scenario.name, **inline()}, auth), 400)
    assert taken["errors"] == {"name": ["Another scenario of this project has this name."]}
    assert assert_error(post(client, inline(), auth), 400)["errors"] == {"name": ["This field is required."]}
    assert assert_error(post(client, {"name": 7, **inline()}, auth), 400)["errors"] == {
        "name": ["Expected a string."]
    }
    other = save_scenario(a.project, "other", inline())
    renamed = assert_error(patch(client, other, {"name": a.scenario.name}, auth), 400)
    assert renamed["errors"]["name"] == ["Another scenario of this project has this name."]
    refused = assert_error(post(client, {"name": "big", **inline(users=10**9)}, auth), 400)
    assert list(refused["errors"]) == ["users"]
    assert assert_error(post(client, ["not", "an", "object"], auth), 400)["errors"] == {
        "non_field_errors": ["Expected a JSON object."]
    }
    assert not Scenario.objects.filter(name="big").exists()


def test_a_read_token_may_not_save_and_another_projects_scenario_is_unknown(client, world, a, bearer):
    read = bearer(world["users"]["member"], a.project, "read")
    assert_error(post(client, {"name": "x", **inline()}, read), 403)
    assert_error(patch(client, a.scenario, {"tolerance_pct": 5}, read), 403)
    viewer = bearer(world["users"]["viewer"], a.project, "run")
    assert_error(patch(client, a.scenario, {"tolerance_pct": 5}, viewer), 403)
    member = bearer(world["users"]["member"], a.project, "run")
    assert_error(patch(client, world["b"].scenario, {"tolerance_pct": 5}, member), 404)
    assert_error(client.get(f"/api/v1/scenarios/{world['b'].scenario.code}", **member), 404)
    assert Scenario.objects.get(pk=a.scenario.pk).tolerance_pct == 10.0


def test_a_run_judged_after_the_api_set_the_tolerance_is_judged_with_it(client, world, a, auth):
    """Stored runs (real histograms and per-second series): the baseline's new_connection_tls costs
    2.6 ms, the later runs' 3.6 ms, a gap far above the default 10% (260 µs) and within 100%."""
    urls = inline("http://127.0.0.1:1/judged", "https://127.0.0.1:2/judged")  # make_run's target's
    scenario = Scenario.objects.get(code=post(client, {"name": "judged", **urls}, auth).json()["id"])
    owner = world["users"]["member"]

    def run_of_scenario(tls_new_us: int) -> Run:
        arms = {"plain": [400] * 100, "tls": [500] * 100, "tls_new": [tls_new_us] * 100}
        run = make_run(owner, arms=arms, seconds=10, project=a.project, target_name="judged")
        assert run.target_id == scenario.target_id  # the scenario's URLs, so its target
        Run.objects.filter(pk=run.pk).update(scenario=scenario, scenario_version=scenario.version)
        return run

    services.pin_baseline(run_of_scenario(3000))
    assert patch(client, scenario, {"tolerance_pct": 100}, auth).status_code == 200
    first = judge_run(run_of_scenario(4000).pk)
    assert first.tolerance_pct == 100.0 and first.result["tolerance_pct"] == 100.0
    cost = next(c for c in first.result["costs"] if c["name"] == "new_connection_tls")
    assert cost["tolerance_us"] == cost["baseline"]["delta"]  # 100% of about 2,600 µs
    assert cost["judgement"] == "unchanged" and first.status == "unchanged"
    assert patch(client, scenario, {"tolerance_pct": 10}, auth).status_code == 200
    second = judge_run(run_of_scenario(4000).pk)
    cost = next(c for c in second.result["costs"] if c["name"] == "new_connection_tls")
    assert cost["tolerance_us"] == round(cost["baseline"]["delta"] / 10, 3)
    assert cost["judgement"] == "regression" and second.status == "regression"
