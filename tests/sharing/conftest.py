"""A project with an owner, a member and a viewer, an outsider in their own project, and two finished
runs of the project with real histograms."""

from __future__ import annotations

import pytest

from portal.projects.models import Membership, Project, Role
from tests.runs.factories import make_run

ARMS = {
    "plain": [300 + i % 50 for i in range(300)],
    "tls": [380 + i % 60 for i in range(300)],
    "tls_new": [4000 + i % 400 for i in range(300)],
}


@pytest.fixture
def team(django_user_model):
    users = {
        role: django_user_model.objects.create_user(role, password=f"{role}-pass-123")
        for role in ("owner", "member", "viewer", "outsider")
    }
    project = Project.objects.create(name="audited")
    Membership.objects.create(project=project, user=users["owner"], role=Role.OWNER)
    Membership.objects.create(project=project, user=users["member"], role=Role.MEMBER)
    Membership.objects.create(project=project, user=users["viewer"], role=Role.VIEWER)
    runs = [
        make_run(users["owner"], arms=ARMS, seconds=4, summarize=True, project=project, target_name="shop")
        for _ in range(2)
    ]
    return {"users": users, "project": project, "runs": runs}
