"""A server upgrade between two real runs: the target's plain and TLS servers answer with one
``Server`` header, then another. Each run's report records what each URL said
(``run.target.server_software``), its page shows it under "Method and provenance", compare lists it
among the setup differences and the regression judgement's "what changed" names it, before and
after. Short runs (two arms, 1 s windows, open loop at a low rate): only the preflight's facts
matter here."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.lib.report import compare
from portal.lib.watching import judgements as judge
from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.servers import LocalServer, ServerSoftware
from workers import tasks

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


def run_once(owner, target: Target, plain: LocalServer, tls: LocalServer) -> Run:
    config = engine_config({"plain": plain.url(), "tls": tls.url()}, arrival_rate=20)
    run = services.create_run(owner, target, config)
    assert tasks.run_benchmark(run.pk) == "succeeded"
    run.refresh_from_db()
    return run


def test_a_server_upgrade_is_recorded_compared_and_named_among_what_changed(owner, tls_cert, client):
    software = ServerSoftware("nginx/1.22.1")
    plain, tls = LocalServer(app=software).start(), LocalServer(tls=tls_cert, app=software).start()
    try:
        target = services.get_or_create_target(personal_project(owner), "local", plain.url(), tls.url())
        before = run_once(owner, target, plain, tls)
        software.name = "nginx/1.26.0"  # the upgrade
        after = run_once(owner, target, plain, tls)
    finally:
        plain.stop()
        tls.stop()
    old, new = reporting.run_report(before), reporting.run_report(after)
    assert old["run"]["target"]["server_software"] == {"tls": "nginx/1.22.1", "plain": "nginx/1.22.1"}
    assert new["run"]["target"]["server_software"] == {"tls": "nginx/1.26.0", "plain": "nginx/1.26.0"}

    differing = {d["key"]: d["values"] for d in compare.compare([old, new])["setup_differences"]}
    assert differing["server_software"] == ["nginx/1.22.1", "nginx/1.26.0"]
    changes = {c["key"]: c for c in judge.what_changed(new, old)}
    upgrade = changes["server_software"]
    assert (upgrade["label"], upgrade["before"], upgrade["after"]) == (
        "server software",
        "nginx/1.22.1",
        "nginx/1.26.0",
    )
    assert judge.describe_change(upgrade) == "server software: nginx/1.22.1 → nginx/1.26.0"

    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[after.code])).content.decode()
    assert 'id="server-software"' in page
    assert '<span data-url="tls">nginx/1.26.0</span>' in page
    assert '<span data-url="plain">nginx/1.26.0</span>' in page
    compared = client.get(reverse("runs-compare") + f"?runs={before.code},{after.code}").content.decode()
    assert 'data-setting="server_software"' in compared
