"""Each validity check fires on a real bad server and stays quiet on a good one.

Every run here goes the whole way: form-shaped config → stored Run → real engine subprocess against
a real local server → stored arms → report. No check is fed made-up numbers.
"""

from __future__ import annotations

import base64
import shutil

import pytest

from portal.projects.models import personal_project
from portal.runs import reporting, services
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.servers import (
    AuthPages,
    DriftingPages,
    PassesPreflight,
    StallingServer,
    redirecting_pages,
    sized_pages,
    varying_pages,
)
from workers import runner

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
# The checks whose verdict rests on timing or the generator's CPU (a healthy run staying quiet, drift,
# SYN retransmits, generator saturation) are `serial`: they run alone, after the parallel part
# (Makefile), closed loop as they were written. The others judge status codes, headers, bodies and
# sessions, which load cannot move: they run open loop at a modest rate (``measure``'s default).
pytestmark = pytest.mark.django_db(transaction=True)


def measure(owner, arms, *, secrets: dict | None = None, **options) -> tuple[Run, dict]:
    target, _ = Target.objects.get_or_create(project=personal_project(owner), name="validity")
    # Open loop at a modest rate: enough samples for what these checks judge, without two
    # processes burning a core each for the whole window beside the other tests (closed loop).
    load = {"users": 2, "spawn_rate": 100, "warmup_s": 0.5, "duration_s": 2.0, "arrival_rate": 200}
    config = engine_config(dict(arms), **{**load, **options})
    run = services.create_run(owner, target, config, secrets=secrets)
    run = runner.execute_run(run.pk)
    return run, reporting.run_report(run)


def checks(report: dict) -> dict[str, dict]:
    return {item["check"]: item for item in report["validity"]}


@pytest.mark.serial
def test_a_healthy_open_loop_run_keeps_every_check_quiet(owner, server_with, tls_cert):
    plain, tls = server_with(), server_with(tls=tls_cert)
    # Open loop at a modest rate: enough samples for p99, and a generator far from saturation.
    run, report = measure(
        owner, [("plain", plain.url()), ("tls", tls.url())], users=4, arrival_rate=400, duration_s=3.0
    )
    assert run.status == Run.Status.SUCCEEDED, run.error
    found = checks(report)
    for name in (
        "status_codes",
        "errors",
        "content_length",
        "same_content",
        "generator_saturation",
        "arrival_rate",
        "sample_size",
        "redirect",
        "auth",
        "keepalive",
    ):
        assert found[name]["status"] == "pass", found[name]
    # What it could not judge it says so: 3 seconds are too few to compare halves, and keep-alive
    # arms open their connections during the warm-up.
    for name in ("drift", "syn_retransmit", "tls_sessions"):
        assert found[name]["status"] == "skip", found[name]
    # The open-loop schedule really paced the arms (±10% of 400 req/s).
    for arm in report["arms"].values():
        assert 360 <= arm["rps"] <= 440, arm["rps"]
        assert arm["requests"] >= 1000


def _paid_connections(arm: dict, users: int) -> None:
    """A keep-alive arm against a server that ends connections after 5 requests: every connection it
    opened in its window was a reopening (all users connected in the warm-up), one per 5 requests."""
    assert arm["connections_reopened"] == arm["connections_opened"] > 0
    assert abs(5 * arm["connections_opened"] - arm["requests"]) <= 5 * users


def test_keepalive_fails_on_a_server_that_ends_connections_after_five_requests(owner, server_with, tls_cert):
    plain = server_with(max_requests_per_connection=5)
    tls = server_with(tls=tls_cert, max_requests_per_connection=5)
    run, report = measure(owner, [("plain", plain.url()), ("tls", tls.url())])
    assert run.status == Run.Status.SUCCEEDED, run.error
    for name, server in (("plain", plain), ("tls", tls)):
        arm = report["arms"][name]
        _paid_connections(arm, users=2)
        # What the server saw: every connection it accepted served at most 5 requests, and all but a
        # few (the preflight's, the TLS facts probe's, each user's last) exactly 5.
        seen = server.counters.snapshot()
        assert seen["connections"] >= arm["connections_opened"]
        # The TLS facts' accept probe also connects to the TLS server: short handshakes, no request
        # (it counts those it completed or timed out; one or two more can end before either).
        probe = report["tls_info"]["accept_probe"]["handshakes"] + 2 if name == "tls" else 0
        assert 5 * (seen["connections"] - 6 - probe) <= seen["requests"] <= 5 * seen["connections"]
    found = checks(report)["keepalive"]
    # A fifth of the requests paid a new connection (and on tls a full handshake): over 5%, a failure.
    assert found["status"] == "fail" and found["arms"] == ["plain", "tls"]
    for name in ("plain", "tls"):
        evidence = found["evidence"][name]
        assert 0.15 <= evidence["new_connection_share"] <= 0.25, evidence
        assert 4.0 <= evidence["requests_per_connection"] <= 6.0, evidence
    assert (
        "a new connection and a TLS handshake" in found["detail"] and "keepalive_requests" in found["detail"]
    )
    # The keep-alive TLS cost is not read as the warm connection's: it is not judged, and says why.
    cost = next(c for c in report["costs"] if c["name"] == "keepalive_tls" and c["metric"] == "ttlb_p50_us")
    assert cost["verdict"] is None and "(keepalive)" in cost["not_judged"]
    assert "tls: the server closed its connections" in cost["not_judged"]


def test_keepalive_warns_on_apaches_default_of_a_hundred_requests(owner, server_with, tls_cert):
    plain = server_with()
    tls = server_with(tls=tls_cert, max_requests_per_connection=100)  # Apache's MaxKeepAliveRequests
    run, report = measure(owner, [("plain", plain.url()), ("tls", tls.url())], duration_s=3.0)
    assert run.status == Run.Status.SUCCEEDED, run.error
    arm = report["arms"]["tls"]
    assert arm["connections_reopened"] == arm["connections_opened"] > 0
    assert (
        report["arms"]["plain"]["connections_opened"] == report["arms"]["plain"]["connections_reopened"] == 0
    )
    found = checks(report)["keepalive"]
    assert found["status"] == "warn" and found["arms"] == ["tls"], found
    assert 0.005 <= found["evidence"]["tls"]["new_connection_share"] < 0.05
    # A warning withholds no claim: the cost is judged (here 3 s: unconfirmed, for want of an
    # interval, not for the warning), with the caveat beside it (and in the answer).
    cost = next(c for c in report["costs"] if c["name"] == "keepalive_tls" and c["metric"] == "ttlb_p50_us")
    assert cost["not_judged"] is None and (cost["verdict"] is not None or cost["unconfirmed"])
    assert "keepalive" in [w["check"] for w in cost["warnings"]]
    assert "keepalive" in report["headline"]


def test_status_codes_and_auth_fail_on_a_server_that_answers_401(owner, server_with):
    guarded = AuthPages("Basic " + base64.b64encode(b"auditor:s3cret").decode())
    # It asks for credentials once the load has started (from the first request, the preflight
    # stops the run: tests/workers/test_preflight.py).
    server = server_with(app=PassesPreflight(guarded))
    run, report = measure(owner, [("plain", server.url())])
    # Every answer a 401: the run measured nothing and fails saying so; the checks say why.
    assert run.status == Run.Status.FAILED
    assert run.error == f"no arm measured the page: plain: 401 × {report['arms']['plain']['requests']:,}"
    found = checks(report)
    assert found["status_codes"]["status"] == "fail"
    assert "401×" in found["status_codes"]["detail"]
    refused = found["status_codes"]["evidence"]["plain"]["unexpected"]["401"]
    assert refused == report["arms"]["plain"]["requests"]
    assert found["auth"]["status"] == "fail"
    assert "none were configured" in found["auth"]["detail"]


def test_preemptive_basic_auth_passes_without_a_single_401(owner, server_with):
    guarded = AuthPages("Basic " + base64.b64encode(b"auditor:s3cret").decode())
    server = server_with(app=guarded)
    secrets = {"auth": {"type": "basic", "user": "auditor", "secret": "s3cret"}}
    # headers_over_http: a plain arm gets credentials only when the user allowed it.
    run, report = measure(owner, [("plain", server.url())], secrets=secrets, headers_over_http=True)
    found = checks(report)
    assert found["auth"]["status"] == "pass" and found["status_codes"]["status"] == "pass"
    assert report["arms"]["plain"]["status_codes"] == {"200": report["arms"]["plain"]["requests"]}
    # Pre-emptive: the server never had to ask (no 401 round trip, not even in preflight).
    assert guarded.refused == 0
    # The secret is sealed at rest and absent from the report.
    assert "s3cret" not in str(Run.objects.get(pk=run.pk).config)
    assert "s3cret" not in str(report)
    # Of the credentials the report says the type, never whose (the user name stays sealed in the config).
    assert report["run"]["config"]["auth"] == {"type": "basic"} and "auditor" not in str(report)


def test_wrong_credentials_are_reported_as_rejected(owner, server_with):
    server = server_with(app=PassesPreflight(AuthPages("Bearer right-token")))
    run, report = measure(
        owner,
        [("plain", server.url())],
        secrets={"auth": {"type": "bearer", "user": "", "secret": "wrong"}},
        headers_over_http=True,
    )
    found = checks(report)
    assert found["auth"]["status"] == "fail" and "were rejected" in found["auth"]["detail"]


def test_content_length_warns_when_a_page_varies(owner, server_with):
    server = server_with(app=varying_pages)
    run, report = measure(owner, [("plain", server.url("/page"))])
    found = checks(report)["content_length"]
    assert found["status"] == "warn"
    assert len(found["evidence"]["varying"]["plain"]["/page"]) > 1


def test_same_content_fails_when_arms_get_different_pages(owner, server_with, tls_cert):
    plain = server_with(app=sized_pages({"/1k": 1024}))
    tls = server_with(tls=tls_cert, app=sized_pages({"/1k": 2048}))
    run, report = measure(owner, [("plain", plain.url()), ("tls", tls.url())])
    assert checks(report)["content_length"]["status"] == "pass"  # one size within each arm
    found = checks(report)["same_content"]
    assert found["status"] == "fail"
    (differing,) = found["evidence"]["differing"]
    assert differing["arms"] == ["tls", "plain"]
    assert differing["targets"] == [
        {"paths": ["/1k", "/1k"], "label": "/1k", "differences": ["body 2,048 B vs 1,024 B"]}
    ]


def test_redirect_is_resolved_once_and_the_final_url_measured(owner, server_with):
    server = server_with(app=redirecting_pages)
    run, report = measure(owner, [("plain", server.url("/old"))])
    assert run.status == Run.Status.SUCCEEDED, run.error
    arm = report["arms"]["plain"]
    assert arm["url"] == server.url("/1k") and arm["requested_url"] == server.url("/old")
    assert arm["redirects"] == [{"from": server.url("/old"), "to": server.url("/1k"), "status": 301}]
    assert arm["status_codes"] == {"200": arm["requests"]}
    assert arm["response_bytes"] == {"min": 1024, "max": 1024}
    found = checks(report)["redirect"]
    assert found["status"] == "warn" and "/old" in found["detail"]


def test_an_unfollowed_redirect_fails_the_redirect_and_status_checks(owner, server_with):
    server = server_with(app=PassesPreflight(redirecting_pages))  # redirects once the load has started
    run, report = measure(owner, [("plain", server.url("/old"))], follow_redirects=False)
    found = checks(report)
    assert found["redirect"]["status"] == "fail" and found["status_codes"]["status"] == "fail"
    assert report["arms"]["plain"]["redirects"] == []


def test_a_redirect_to_another_origin_fails_the_arm_with_a_reason(owner, server_with):
    server = server_with(app=redirecting_pages)
    run, _ = measure(owner, [("plain", server.url("/away"))])
    assert run.status == Run.Status.FAILED
    assert "leaves the arm's origin" in run.error and "https://127.0.0.1:9/1k" in run.error


def test_sample_size_fails_for_a_handful_of_requests(owner, server_with):
    server = server_with()
    run, report = measure(owner, [("plain", server.url())], users=1, think_time_s=0.2, arrival_rate=None)
    found = checks(report)["sample_size"]
    assert found["status"] == "fail"
    assert found["evidence"]["plain"]["samples"] < 20
    assert found["evidence"]["plain"]["too_few_for"] == ["p50", "p95", "p99"]


@pytest.mark.serial
def test_drift_warns_when_the_target_slows_down(owner, server_with):
    server = server_with(app=DriftingPages())
    run, report = measure(owner, [("plain", server.url())], users=1, duration_s=4.0, arrival_rate=None)
    found = checks(report)["drift"]
    assert found["status"] == "warn", found
    change = found["evidence"]["plain"]["p50_us"]["change_pct"]
    assert change >= 25


@pytest.mark.serial
def test_syn_retransmit_explains_one_second_connects(owner):
    server = StallingServer(serve_s=1.5, stall_s=0.3).start()
    try:
        run, report = measure(
            owner, [("plain_new", server.url())], users=6, duration_s=4.0, timeout_s=8.0, arrival_rate=None
        )
    finally:
        server.stop()
    found = checks(report)["syn_retransmit"]
    assert found["status"] == "warn", (found, report["arms"]["plain_new"]["connect_us"])
    evidence = found["evidence"]["plain_new"]
    assert evidence["near_1s"] + evidence["near_3s"] >= 1
    assert "accept backlog" in found["detail"]


@pytest.mark.serial
def test_syn_retransmit_is_quiet_on_a_server_that_keeps_up(owner, server_with):
    server = server_with()
    run, report = measure(owner, [("plain_new", server.url())], users=2, arrival_rate=None)
    assert checks(report)["syn_retransmit"]["status"] == "pass"
    assert report["arms"]["plain_new"]["connect_us"]["max"] < 900_000


@pytest.mark.serial
@pytest.mark.skipif(shutil.which("nginx") is None, reason="needs Debian's nginx")
def test_generator_saturation_warns_when_the_client_is_the_bottleneck(owner):
    from bench.nginx import Nginx

    with Nginx() as nginx:
        # Closed loop, no think time, many users, against a server far faster than the client.
        run, report = measure(
            owner, [("plain", nginx.plain_url("/1k"))], users=32, duration_s=3.0, arrival_rate=None
        )
    found = checks(report)["generator_saturation"]
    assert found["status"] == "warn", found
    assert "you measured the client" in found["detail"]
    evidence = found["evidence"]["plain"]
    assert evidence["cpu_pct_median"] >= 85 or evidence["loop_lag_ms_max"] >= 100


def test_tls_sessions_pass_when_new_means_new_and_resumed_resumes(owner, server_with, tls_cert):
    tls = server_with(tls=tls_cert)
    run, report = measure(owner, [("tls_new", tls.url()), ("tls_resumed", tls.url())], users=1)
    found = checks(report)["tls_sessions"]
    assert found["status"] == "pass", found
    assert found["evidence"]["tls_resumed"]["reused"] == found["evidence"]["tls_resumed"]["connections"] > 0


def test_tls_sessions_fail_when_the_server_cannot_resume(owner, server_with, tls_cert):
    tls = server_with(tls=tls_cert, tickets=False)
    run, report = measure(owner, [("tls_resumed", tls.url())], users=1)
    found = checks(report)["tls_sessions"]
    assert found["status"] == "fail", found
    assert found["evidence"]["tls_resumed"]["reused"] == 0
    assert "does not keep sessions" in found["detail"]
