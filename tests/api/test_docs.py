"""docs/api.md and the OpenAPI schema (what the API docs page shows) name the same operations with
the same path parameters: a reader who copies ``/api/v1/runs/{id}/cancel`` from one finds it in the
other, and the parameter is the ``id`` every object of the API's JSON has."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

# A documented operation: `GET /api/v1/runs/{id}`, in headings and sentences alike.
OPERATION = re.compile(r"`(GET|POST|PUT|PATCH|DELETE) (/api/v1/[^`?\s]*)`")


def documented() -> set[tuple[str, str]]:
    return set(OPERATION.findall((ROOT / "docs" / "api.md").read_text()))


def test_the_docs_and_the_schema_name_the_same_operations_and_path_parameters(client):
    schema = json.loads(client.get("/api/v1/schema").content)
    served = {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}
    assert documented() == served
    for path, ops in schema["paths"].items():
        in_path = re.findall(r"{(\w+)}", path)
        for method, op in ops.items():
            declared = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
            assert declared == in_path, (method, path, declared)
    # One name for a run's public id: the JSON's "id", never the model's column ("code").
    assert {name for path in schema["paths"] for name in re.findall(r"{(\w+)}", path)} == {"id"}


def test_a_run_is_reached_at_the_path_the_docs_give_with_the_id_its_json_gives(client, world, bearer):
    a = world["a"]
    auth = bearer(world["users"]["viewer"], a.project, "read")
    listed = client.get("/api/v1/runs", **auth).json()["results"][0]
    scenario = client.get("/api/v1/scenarios", **auth).json()["results"][0]
    for method, path in sorted(documented()):
        if method == "GET" and "{id}" in path:
            # A path under /scenarios/ takes a scenario's id, every other one a run's.
            code = scenario["id"] if path.startswith("/api/v1/scenarios/") else listed["id"]
            response = client.get(path.replace("{id}", code), **auth)
            assert response.status_code == 200, (path, response.content[:300])
