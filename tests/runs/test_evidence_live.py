"""No claim without its evidence, on real servers through the real engine: arms that were served
different things, a server that cannot resume, an arm that mostly failed, a run too short for
intervals. Each run goes config → stored Run → engine subprocess → stored arms → report and pages.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.servers import PassesPreflight, ResettingServer, answering, gzipped_pages, sized_pages
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


def measure(owner, arms, **options) -> tuple[Run, dict]:
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="evidence")
    # Open loop at a modest rate: enough samples for what these checks judge, without two
    # processes burning a core each for the whole window beside the other tests (closed loop).
    load = {"users": 2, "spawn_rate": 100, "warmup_s": 0.5, "duration_s": 2.0, "arrival_rate": 200}
    config = engine_config(dict(arms), **{**load, **options})
    run = runner.execute_run(services.create_run(owner, target, config).pk)
    return run, reporting.run_report(run)


def checks(report: dict) -> dict[str, dict]:
    return {item["check"]: item for item in report["validity"]}


def cost(report: dict, name: str, metric: str = "ttlb_p50_us") -> dict:
    (found,) = [c for c in report["costs"] if c["name"] == name and c["metric"] == metric]
    return found


def test_mapped_paths_with_different_bodies_fail_same_content(owner, server_with, tls_cert):
    # The plain URL's /1k and the TLS URL's /4k are the arms' one mapped target: 1 KB against 4 KB.
    plain = server_with(app=sized_pages({"/1k": 1024}))
    tls = server_with(tls=tls_cert, app=sized_pages({"/4k": 4096}))
    run, report = measure(owner, [("plain", plain.url("/1k")), ("tls", tls.url("/4k"))])
    assert run.status == Run.Status.SUCCEEDED, run.error
    found = checks(report)["same_content"]
    assert found["status"] == "fail" and found["arms"] == ["tls", "plain"]
    assert "tls vs plain — /4k vs /1k: body 4,096 B vs 1,024 B" in found["detail"]
    keepalive = cost(report, "keepalive_tls")
    assert (
        keepalive["verdict"] is None and "body 4,096 B vs 1,024 B (same_content)" in keepalive["not_judged"]
    )
    assert report["run"]["checks"]["fail"] >= 1
    assert "not judged" in report["headline"] and "adds" not in report["headline"]


def test_one_port_that_gzips_fails_same_content(owner, server_with, tls_cert):
    # Same path on both ports (a weighted mix of one path), but only the TLS port compresses.
    plain = server_with(app=sized_pages({"/page": 4096}))
    tls = server_with(tls=tls_cert, app=gzipped_pages({"/page": 4096}))
    run, report = measure(
        owner,
        [("plain", plain.url("/page")), ("tls", tls.url("/page"))],
        paths=[{"path": "/page", "weight": 1}],
    )
    assert report["arms"]["tls"]["content_by_path"]["/page"]["content_encoding"] == ["gzip"]
    assert report["arms"]["plain"]["content_by_path"]["/page"] == {
        "content_type": ["text/html"],
        "content_encoding": [""],
    }
    found = checks(report)["same_content"]
    assert found["status"] == "fail", found
    assert "Content-Encoding gzip vs identity" in found["findings"][0]["reason"]
    assert cost(report, "keepalive_tls")["verdict"] is None
    assert "(same_content)" in cost(report, "keepalive_tls")["not_judged"]  # withheld by the check


def test_the_same_page_on_both_ports_passes_same_content(owner, server_with, tls_cert):
    plain, tls = server_with(), server_with(tls=tls_cert)
    run, report = measure(owner, [("plain", plain.url("/2k")), ("tls", tls.url("/2k"))])
    found = checks(report)["same_content"]
    assert found["status"] == "pass" and "Content-Type, Content-Encoding" in found["detail"]
    assert cost(report, "keepalive_tls")["not_judged"] is None  # same content: nothing withholds it


def test_five_arms_against_a_server_without_resumption(client, owner, server_with, tls_cert):
    plain, tls = server_with(), server_with(tls=tls_cert, tickets=False)
    arms = [
        ("plain", plain.url()),
        ("tls", tls.url()),
        ("plain_new", plain.url()),
        ("tls_new", tls.url()),
        ("tls_resumed", tls.url()),
    ]
    run, report = measure(owner, arms, duration_s=1.5)
    assert run.status == Run.Status.SUCCEEDED, run.error
    # The server saw no resumption at all; the report believes the server.
    assert tls.counters.snapshot()["resumed"] == 0
    sessions = checks(report)["tls_sessions"]
    assert (sessions["status"], sessions["arms"]) == ("fail", ["tls_resumed"])
    for metric in ("ttlb_p50_us", "ttlb_p95_us", "rps"):
        saving = cost(report, "resumption_saving", metric)
        assert saving["verdict"] is None
        assert saving["not_judged"].startswith("tls_resumed did not resume — 0 of ")
    assert "session resumption: not judged" in report["headline"]
    assert "saves" not in report["headline"]
    # The other costs stand (their arms did nothing wrong with sessions).
    assert (
        cost(report, "handshake")["not_judged"] is None
        or "tls_resumed" not in cost(report, "handshake")["not_judged"]
    )
    # The runs list shows the run's badge from its stored summary.
    run.refresh_from_db()
    assert run.summary["checks"]["fail"] >= 1
    client.force_login(owner)
    body = client.get(reverse("runs-list")).content.decode()
    assert 'data-checks="bad"' in body and "failed check" in body
    detail = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'id="run-checks"' in detail and "failed check" in detail


def test_an_arm_whose_attempts_mostly_failed_is_invalid_not_just_succeeded(client, owner):
    server = ResettingServer(every=4).start()
    try:
        run, report = measure(owner, [("plain_new", server.url())], users=2)
    finally:
        server.stop()
    # The engine finished, but the run's only arm is invalid: it measured nothing, and says what.
    assert run.status == Run.Status.FAILED
    assert run.error.startswith("no arm measured the page: plain_new: connection_reset × "), run.error
    arm = report["arms"]["plain_new"]
    assert arm["invalid"] is not None and "attempts failed (connection_reset×" in arm["invalid"]
    share = int(arm["invalid"].split("%")[0])
    assert 60 <= share <= 85  # three in four connections were reset by the server
    assert report["run"]["invalid_arms"] == {"plain_new": arm["invalid"]}
    assert checks(report)["errors"]["status"] == "fail"
    client.force_login(owner)
    detail = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert 'data-invalid-arm="plain_new"' in detail and "1 invalid arm (plain_new)" in detail


def test_every_answer_a_431_makes_every_arm_invalid_and_no_cost_judged(owner, server_with, tls_cert):
    # From the first request after the preflight (a 431 in the preflight stops the run before it).
    plain = server_with(app=PassesPreflight(answering(431)))
    tls = server_with(tls=tls_cert, app=PassesPreflight(answering(431)))
    run, report = measure(owner, [("plain", plain.url()), ("tls", tls.url())])
    assert set(report["run"]["invalid_arms"]) == {"plain", "tls"}
    assert "status 431×" in report["arms"]["plain"]["invalid"]
    assert all(c["verdict"] is None for c in report["costs"])
    assert checks(report)["same_content"]["status"] == "pass"  # both arms got the same 431s


def test_a_short_run_skips_what_it_cannot_judge_and_has_no_interval(owner, server_with, tls_cert):
    plain, tls = server_with(), server_with(tls=tls_cert)
    run, report = measure(owner, [("plain", plain.url()), ("tls", tls.url())], duration_s=2.0)
    found = checks(report)
    assert found["drift"]["status"] == "skip" and "fewer than 4 seconds" in found["drift"]["detail"]
    assert found["tls_sessions"]["status"] == "skip"
    assert report["run"]["checks"]["skip"] >= 2
    assert all(c["ci95"] is None and c["ci_method"] == "none" for c in report["costs"])
    # No interval, so no verdict either: each cost says "unconfirmed" and why.
    assert all(c["verdict"] is None and c["unconfirmed"] for c in report["costs"])
    assert report["headline"].endswith(
        "Unconfirmed: too few seconds/rounds for an interval — measure ≥ 5 s per arm or 3 rounds."
    )
