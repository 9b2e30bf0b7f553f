"""Two projects side by side, each with runs (with arms), a target with SSH access and a scenario;
users: owner, member and viewer of A, an outsider who is a member of B only."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from portal import vault
from portal.projects.models import Membership, Project, Role
from portal.scenarios.models import Scenario
from portal.targets.models import SshAccess
from tests.runs.factories import make_run


@dataclass
class Side:
    project: Project
    runs: list
    target: object
    scenario: Scenario


def _side(name: str, owner) -> Side:
    project = Project.objects.create(name=name)
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    first = make_run(owner, target_name=name, project=project)
    second = make_run(owner, target_name=name, project=project)
    target = first.target
    SshAccess.objects.create(
        target=target, host="127.0.0.1", username="probe", private_key_enc=vault.encrypt("k"), public_key="p"
    )
    scenario = Scenario.objects.create(project=project, target=target, name=f"{name} scenario")
    return Side(project, [first, second], target, scenario)


@pytest.fixture
def world(django_user_model):
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider", "b_owner")
    }
    a = _side("alpha", users["owner"])
    b = _side("beta", users["b_owner"])
    Membership.objects.create(project=a.project, user=users["member"], role=Role.MEMBER)
    Membership.objects.create(project=a.project, user=users["viewer"], role=Role.VIEWER)
    Membership.objects.create(project=b.project, user=users["outsider"], role=Role.MEMBER)
    return {"users": users, "a": a, "b": b}
