"""The OpenAPI 3 schema: served, valid, and true — schemathesis generates requests for every
operation (valid and invalid data, random and real ids) against the WSGI app and checks each answer:
no server error, a documented status code, content type, headers and body.

The API's fuzz surface (docs/fuzzing.md): its case count follows ``TOLLGATE_FUZZ`` (short: 15 per
operation and mode, as in CI; long, ``make fuzz``: 100) and is counted with the other surfaces'
(tests/fuzz/budget.py)."""

from __future__ import annotations

import json

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.validation import validate_schema
from hypothesis import given
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from portal.runs.models import Run
from tests.api.conftest import inline
from tests.fuzz import budget

pytestmark = pytest.mark.django_db

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
OPERATIONS = {
    ("GET", "/api/v1/runs"),
    ("POST", "/api/v1/runs"),
    ("GET", "/api/v1/runs/{id}"),
    ("GET", "/api/v1/runs/{id}/report"),
    ("POST", "/api/v1/runs/{id}/cancel"),
    ("POST", "/api/v1/runs/{id}/shares"),
    ("POST", "/api/v1/runs/{id}/baseline"),
    ("DELETE", "/api/v1/runs/{id}/baseline"),
    ("GET", "/api/v1/targets"),
    ("GET", "/api/v1/scenarios"),
    ("POST", "/api/v1/scenarios"),
    ("GET", "/api/v1/scenarios/{id}"),
    ("PATCH", "/api/v1/scenarios/{id}"),
    ("GET", "/api/v1/scenarios/{id}/schedule"),
    ("PUT", "/api/v1/scenarios/{id}/schedule"),
    ("DELETE", "/api/v1/scenarios/{id}/schedule"),
}


def test_the_schema_is_served_as_valid_openapi_3(client):
    response = client.get("/api/v1/schema")  # public: no token needed to read the description
    assert response.status_code == 200 and "json" in response["Content-Type"]
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.")
    validate_schema(schema)  # drf-spectacular's bundled OpenAPI 3.0 JSON schema
    assert {(m.upper(), p) for p, ops in schema["paths"].items() for m in ops} == OPERATIONS
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            assert op["security"] == [{"bearerAuth": []}], (method, path)
            assert "401" in op["responses"], (method, path)
            for code, answer in op["responses"].items():
                assert "application/json" in answer["content"], (method, path, code)
    run_in = schema["components"]["schemas"]["RunInRequest"]["oneOf"]
    assert len(run_in) == 2  # a saved scenario with overrides, or inline


@pytest.fixture(scope="module", autouse=True)
def _no_dns():
    """Generated URLs name random hosts, which the outbound policy would look up: no DNS here."""
    with budget.no_dns():
        yield


@pytest.fixture
def schema():
    """The schema loaded through the WSGI app, in this process and this test's transaction. As
    Django's test client does, the app must not close the connection at the end of each request."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/v1/schema", get_wsgi_application())
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _operations(schema):
    for result in schema.get_all_operations():
        yield result.ok()


def _fuzz(operation, headers: dict, mode: GenerationMode, **fixed) -> None:
    @given(case=operation.as_strategy(mode, **fixed))
    @budget.schema_settings()
    def call(case):
        budget.count(budget.SCHEMA_SURFACE)
        case.call_and_validate(headers=headers, checks=CHECKS)

    call()


def test_every_operation_answers_as_its_schema_says(schema, world, bearer):
    a = world["a"]
    read = bearer(world["users"]["viewer"], a.project, "read")
    headers = {"Authorization": read["HTTP_AUTHORIZATION"]}
    seen = set()
    for operation in _operations(schema):
        seen.add((operation.method.upper(), operation.path))
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            _fuzz(operation, headers, mode)
            if "{id}" in operation.path:  # and on a real object of the project, not only random ids
                real = a.scenario if operation.path.startswith("/api/v1/scenarios/") else a.runs[0]
                _fuzz(operation, headers, mode, path_parameters={"id": str(real.code)})
    assert seen == OPERATIONS
    assert Run.objects.filter(project=a.project).count() == 2  # a read token changed nothing


def test_what_a_run_token_does_matches_the_schema_too(schema, world, bearer):
    """The success answers of the writing operations (a read token only ever sees 403 there)."""
    a = world["a"]
    headers = {"Authorization": bearer(world["users"]["member"], a.project, "run")["HTTP_AUTHORIZATION"]}

    def call(method: str, path: str, expected: int, **kwargs):
        operation = schema[path][method]
        case = operation.Case(**kwargs)
        response = case.call_and_validate(headers=headers, checks=CHECKS)
        assert response.status_code == expected, response.text[:500]
        return response.json()

    created = call("POST", "/api/v1/runs", 201, body=inline())
    from_scenario = call("POST", "/api/v1/runs", 201, body={"scenario": str(a.scenario.code)})
    assert from_scenario["scenario"]["version"] == 1
    call("POST", "/api/v1/runs", 400, body=inline(users=10**9))
    call("POST", "/api/v1/runs/{id}/cancel", 200, path_parameters={"id": created["id"]})
    call("POST", "/api/v1/runs/{id}/cancel", 409, path_parameters={"id": created["id"]})
    Run.objects.filter(code=from_scenario["id"]).update(status=Run.Status.RUNNING)
    call("POST", "/api/v1/runs/{id}/cancel", 202, path_parameters={"id": from_scenario["id"]})
    listed = call("GET", "/api/v1/runs", 200, query={"status": "cancelled"})
    assert [r["id"] for r in listed["results"]] == [created["id"]]
    # A baseline: a cancelled run is refused (409), a succeeded one pinned and unpinned.
    call("POST", "/api/v1/runs/{id}/baseline", 409, path_parameters={"id": created["id"]})
    pinned = call("POST", "/api/v1/runs/{id}/baseline", 200, path_parameters={"id": str(a.runs[0].code)})
    assert pinned["baseline"] is True
    call("DELETE", "/api/v1/runs/{id}/baseline", 200, path_parameters={"id": str(a.runs[0].code)})
    # Scenarios: saved, changed (its tolerance), refused.
    saved = call("POST", "/api/v1/scenarios", 201, body={"name": "schema", **inline(), "tolerance_pct": 20})
    changed = call(
        "PATCH", "/api/v1/scenarios/{id}", 200, path_parameters={"id": saved["id"]}, body={"tolerance_pct": 5}
    )
    assert (changed["version"], changed["tolerance_pct"]) == (2, 5.0)
    call(
        "PATCH",
        "/api/v1/scenarios/{id}",
        400,
        path_parameters={"id": saved["id"]},
        body={"tolerance_pct": -1},
    )
    # And generated bodies through the whole creation path (form, quotas, policy): never a 500.
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        _fuzz(schema["/api/v1/runs"]["POST"], headers, mode)
        _fuzz(
            schema["/api/v1/runs/{id}/cancel"]["POST"],
            headers,
            mode,
            path_parameters={"id": created["id"]},
        )
        _fuzz(schema["/api/v1/scenarios"]["POST"], headers, mode)
        _fuzz(schema["/api/v1/scenarios/{id}"]["PATCH"], headers, mode, path_parameters={"id": saved["id"]})
