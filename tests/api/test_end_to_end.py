"""One run started through the API, measured by a real Celery worker against local plain and TLS
servers, followed through the API to ``succeeded``, then its report fetched through the API."""

from __future__ import annotations

import time

from portal.api import tokens
from portal.projects.models import Membership, Project, Role
from tests.api.conftest import inline


def test_a_run_started_through_the_api_finishes_and_reports(
    client, celery_worker, owner, plain_server, tls_server
):
    project = Project.objects.create(name="ci")
    Membership.objects.create(project=project, user=owner, role=Role.MEMBER)
    _, plaintext = tokens.issue(owner, project, scope="run", name="ci")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}
    body = inline(plain_server.url(), tls_server.url(), users=1, spawn_rate=10, duration_s=1)
    created = client.post("/api/v1/runs", body, "application/json", **auth)
    assert created.status_code == 201, created.json()
    location = created["Location"].replace("http://testserver", "")
    deadline = time.monotonic() + 90
    while True:
        run = client.get(location, **auth).json()
        # The worker ends the run and stores its summary in one transaction (workers.runner.finish):
        # an ended run is never seen without it.
        if run["status"] in ("succeeded", "failed", "cancelled"):
            break
        assert celery_worker.poll() is None, "the worker died"
        assert time.monotonic() < deadline, f"still {run['status']} after 90 s"
        time.sleep(0.5)
    assert run["status"] == "succeeded", run["error"]
    assert run["source"] == "api" and run["finished"] is not None
    assert run["summary"]["requests"] > 0 and run["summary"]["headline"]
    report = client.get(run["links"]["report"].replace("http://testserver", ""), **auth)
    assert report.status_code == 200
    data = report.json()
    assert data["run"]["id"] == run["id"] and set(data["arms"]) == {"plain", "tls"}
    # What the servers saw, not what the client says: both arms reached them, TLS with handshakes.
    assert plain_server.counters.snapshot()["requests"] >= data["arms"]["plain"]["requests"] > 0
    assert tls_server.counters.snapshot()["handshakes"] >= 1
    assert data["arms"]["tls"]["requests"] > 0
