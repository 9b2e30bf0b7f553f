"""Pinning a baseline through the API: the run page's check (``services.baseline_refusal``) answers
a run that cannot be one with a 409 and the reason, and nothing is pinned; a run's status line puts a
failed run's reason first."""

from __future__ import annotations

import pytest

from portal.runs import reporting
from portal.runs.models import ArmResult, Run
from portal.targets.models import Target
from tests.api.conftest import assert_error
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db

REASON = "no arm measured the page: 404 × 1,200 on every arm"


@pytest.fixture
def a(world):
    return world["a"]


@pytest.fixture
def auth(world, a, bearer):
    return bearer(world["users"]["member"], a.project, "run")


def baseline_of(run: Run) -> int | None:
    return Target.objects.get(pk=run.target_id).baseline_id


def test_a_failed_run_is_refused_with_its_reason_and_nothing_is_pinned(client, world, a, auth):
    run = make_run(world["users"]["owner"], status=Run.Status.FAILED, target_name="alpha", project=a.project)
    Run.objects.filter(pk=run.pk).update(error=REASON)
    body = assert_error(client.post(f"/api/v1/runs/{run.code}/baseline", **auth), 409)
    assert body["detail"] == (
        f"A failed run cannot be a baseline: only a run that succeeded can (it failed: {REASON})."
    )
    assert body["run_status"] == "failed"
    assert baseline_of(run) is None
    shown = client.get(f"/api/v1/runs/{run.code}", **auth).json()
    assert shown["status_line"] == f"failed: {REASON}" and shown["baseline"] is False


def test_a_run_whose_every_arm_is_invalid_is_refused_even_if_stored_as_succeeded(client, world, a, auth):
    run = make_run(world["users"]["owner"], target_name="alpha", project=a.project)
    ArmResult.objects.filter(run=run).update(status_codes={"404": 100})
    Run.objects.filter(pk=run.pk).update(summary=reporting.summarize(run))
    body = assert_error(client.post(f"/api/v1/runs/{run.code}/baseline", **auth), 409)
    assert "none of its arms measured the page (every arm is invalid: plain, tls, tls_new)" in body["detail"]
    assert baseline_of(run) is None


def test_a_succeeded_run_is_pinned_and_unpinned(client, a, auth):
    run = a.runs[0]
    Run.objects.filter(pk=run.pk).update(summary=reporting.summarize(run))
    response = client.post(f"/api/v1/runs/{run.code}/baseline", **auth)
    assert response.status_code == 200, response.json()
    assert response.json()["baseline"] is True and baseline_of(run) == run.pk
    assert response.json()["links"]["baseline"].endswith(f"/api/v1/runs/{run.code}/baseline")
    assert response.json()["status_line"].startswith("succeeded")
    response = client.delete(f"/api/v1/runs/{run.code}/baseline", **auth)
    assert response.status_code == 200 and response.json()["baseline"] is False
    assert baseline_of(run) is None


def test_pinning_needs_a_run_token_of_a_member_of_the_runs_project(client, world, a, bearer):
    run = a.runs[0]
    read = bearer(world["users"]["member"], a.project, "read")
    assert_error(client.post(f"/api/v1/runs/{run.code}/baseline", **read), 403)
    viewer = bearer(world["users"]["viewer"], a.project, "run")
    assert_error(client.post(f"/api/v1/runs/{run.code}/baseline", **viewer), 403)
    other = bearer(world["users"]["outsider"], world["b"].project, "run")
    assert_error(client.post(f"/api/v1/runs/{run.code}/baseline", **other), 404)
    assert baseline_of(run) is None
