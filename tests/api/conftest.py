"""Two projects side by side (runs, a target, a scenario each) and tokens of their members: the API
tests act through real bearer tokens over Django's full request stack."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from portal.api import tokens
from portal.projects.models import Membership, Project, Role
from portal.runs.starting import save_scenario
from tests.runs.factories import make_run


@dataclass
class Side:
    project: Project
    runs: list
    scenario: object


def inline(plain: str = "http://127.0.0.1:9/", tls: str = "https://127.0.0.1:9/", **extra) -> dict:
    """A small inline run body (loopback is in TOLLGATE_ALLOW_NETWORKS for the tests)."""
    return {
        "plain_url": plain,
        "tls_url": tls,
        "arms": ["plain", "tls"],
        "users": 1,
        "spawn_rate": 1,
        "warmup_s": 0,
        "duration_s": 1,
        "arrival_rate": None,
        "verify_tls": False,
        **extra,
    }


def _side(name: str, owner) -> Side:
    project = Project.objects.create(name=name)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    runs = [make_run(owner, target_name=name, project=project) for _ in range(2)]
    scenario = save_scenario(
        project, f"{name} scenario", inline(f"http://127.0.0.1:9/{name}", f"https://127.0.0.1:9/{name}")
    )
    return Side(project, runs, scenario)


@pytest.fixture
def world(django_user_model):
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider")
    }
    a, b = _side("alpha", users["owner"]), _side("beta", users["outsider"])
    Membership.objects.create(project=a.project, user=users["member"], role=Role.MEMBER)
    Membership.objects.create(project=a.project, user=users["viewer"], role=Role.VIEWER)
    return {"users": users, "a": a, "b": b}


@pytest.fixture
def bearer():
    """``bearer(user, project, scope)`` → the Authorization header (as a test-client keyword) of a new
    token."""

    def make(user, project, scope: str = "read") -> dict:
        _, plaintext = tokens.issue(user, project, scope=scope, name=f"{user.username}-{scope}")
        return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}

    return make


def assert_error(response, status: int) -> dict:
    """The API's one error shape, with the status repeated in the body."""
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["status"] == status and isinstance(body["detail"], str) and body["detail"]
    assert isinstance(body["errors"], dict)
    return body
