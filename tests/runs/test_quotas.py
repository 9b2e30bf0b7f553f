"""Quotas per project: each limit refused with its message (form, page, CLI, worker), and the cap
on runs per generator host that keeps extra runs queued and visibly waiting."""

from __future__ import annotations

import re
import socket
from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from portal.audit.models import AuditEvent
from portal.projects.models import Membership, Project, ProjectQuota, Role, personal_project
from portal.runs import services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.runs.factories import make_run
from workers import runner, slots, tasks

FORM = {
    "plain_url": "http://127.0.0.1:8081/1k",
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["plain", "tls", "tls_new"],
    "users": "4",
    "spawn_rate": "4",
    "warmup_s": "1",
    "duration_s": "5",
}


@pytest.fixture
def acme(owner):
    project = Project.objects.create(name="Acme")
    Membership.objects.create(project=project, user=owner, role=Role.MEMBER)
    return project


def form_errors(project, **overrides) -> dict:
    form = RunForm(data={**FORM, **overrides}, project=project)
    assert not form.is_valid()
    return form.errors


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("quota", "overrides", "field", "message"),
    [
        ({"max_users": 3}, {}, "users", "At most 3 users in project Acme (operator limit)."),
        (
            {"max_arrival_rate": 50},
            {"arrival_rate": "60"},
            "arrival_rate",
            "At most 50 req/s in project Acme",
        ),
        ({"max_duration_s": 4}, {}, "duration_s", "At most 4 s of measurement per arm in project Acme"),
        ({"max_warmup_s": 0.5}, {}, "warmup_s", "At most 0.5 s of warm-up per arm in project Acme"),
        ({"max_rounds": 2}, {"rounds": "3"}, "rounds", "At most 2 rounds in project Acme"),
        ({"max_requests_per_run": 1000}, {"arrival_rate": "100"}, "__all__", "up to 1,800 requests"),
    ],
)
def test_each_config_limit_is_refused_with_its_message(acme, quota, overrides, field, message):
    ProjectQuota.objects.create(project=acme, **quota)
    errors = form_errors(acme, **overrides)
    assert list(errors) == [field]
    assert message in errors[field][0]


@pytest.mark.django_db
def test_operator_defaults_apply_and_a_project_quota_overrides_them(acme, settings):
    settings.TOLLGATE_MAX_USERS = 3
    assert form_errors(acme)["users"] == ["At most 3 users in project Acme (operator limit)."]
    ProjectQuota.objects.create(project=acme, max_users=8, max_rounds=None)
    assert RunForm(data=FORM, project=acme).is_valid()


@pytest.mark.django_db
def test_runs_in_flight_and_per_day_are_form_errors(acme, owner):
    ProjectQuota.objects.create(project=acme, max_concurrent_runs=1, max_runs_per_day=2)
    queued = make_run(owner, project=acme, status=Run.Status.QUEUED)
    assert "already has 1 run(s) queued or running; at most 1 at a time" in form_errors(acme)["__all__"][0]
    Run.objects.filter(pk=queued.pk).update(status=Run.Status.CANCELLED)
    assert RunForm(data=FORM, project=acme).is_valid()
    make_run(owner, project=acme)
    assert "started 2 run(s) in the last 24 hours; at most 2 a day" in form_errors(acme)["__all__"][0]
    # Runs older than a day do not count.
    Run.objects.filter(project=acme).update(created=timezone.now() - timedelta(days=2))
    assert RunForm(data=FORM, project=acme).is_valid()


@pytest.mark.django_db
def test_the_page_states_the_limits_and_refuses_without_queueing(client, owner, broker):
    client.force_login(owner)
    ProjectQuota.objects.create(project=personal_project(owner), max_users=3)
    page = client.get(reverse("runs-new")).content.decode()
    assert "Limits of this project (owner, set by the operator): at most 3 users" in page
    assert re.search(r'<input[^>]*name="users"[^>]*max="3"', page)
    response = client.post(reverse("runs-new"), FORM)
    assert response.status_code == 200
    assert "At most 3 users in project owner (operator limit)." in response.content.decode()
    assert Run.objects.count() == 0 and broker.llen("runs") == 0
    # The refusal is in the project's audit log, for its owners.
    (event,) = AuditEvent.objects.filter(kind=AuditEvent.Kind.QUOTA_REFUSED)
    assert event.project_id == personal_project(owner).pk and "At most 3 users" in event.detail["reasons"][0]


@pytest.mark.django_db
def test_the_cli_refuses_above_a_limit(owner, acme):
    ProjectQuota.objects.create(project=acme, max_duration_s=2)
    with pytest.raises(CommandError, match=r"--duration: At most 2 s of measurement per arm in project Acme"):
        call_command(
            "tollgate", "run", "--owner", "owner", "--project", "Acme", "--plain-url", "http://127.0.0.1:1/",
            "--arms", "plain", "--duration", "3",
        )  # fmt: skip
    assert Run.objects.count() == 0


def queued_run(owner, url: str = "http://127.0.0.1:1/", project=None) -> Run:
    target, _ = Target.objects.get_or_create(project=project or personal_project(owner), name="local")
    config = engine_config(
        {"plain": url}, users=2, spawn_rate=50, warmup_s=0.5, duration_s=1.5, arrival_rate=60
    )
    return services.create_run(owner, target, config)


@pytest.mark.django_db
def test_a_limit_lowered_after_queueing_fails_the_run_before_anything_is_sent(owner):
    run = queued_run(owner)
    ProjectQuota.objects.create(project=personal_project(owner), max_users=1)
    run = runner.execute_run(run.pk)
    assert run.status == Run.Status.FAILED
    assert run.error == (
        "Not started, above the limits of its project: At most 1 users in project owner (operator limit)."
    )
    assert run.arms.count() == 0 and not run.engine


@pytest.mark.django_db(transaction=True)
def test_a_full_generator_keeps_the_next_run_waiting_then_runs_it(owner, plain_server, client, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 1
    host = socket.gethostname()
    first, second = queued_run(owner, plain_server.url()), queued_run(owner, plain_server.url())
    assert runner.claim(first.pk) == runner.CLAIMED  # the first runs on this host
    waiting = runner.execute_run(second.pk)
    assert waiting.status == Run.Status.QUEUED and not waiting.started
    assert waiting.waiting == f"waiting for a generator (1 running on {host})"
    # The task asks Celery to try again later (called directly, Celery raises its Retry).
    with pytest.raises(Retry):
        tasks.run_benchmark(second.pk)
    client.force_login(owner)
    progress = client.get(reverse("runs-progress", args=[second.code])).json()
    assert progress["status"] == "queued" and progress["waiting"] == waiting.waiting
    assert waiting.waiting in client.get(reverse("runs-detail", args=[second.code])).content.decode()
    runner.finish(Run.objects.get(pk=first.pk), Run.Status.SUCCEEDED)
    assert tasks.run_benchmark(second.pk) == "succeeded"
    second.refresh_from_db()
    assert second.attempts.get().host == host and second.waiting == "" and second.arms.get().requests > 0
    assert client.get(reverse("runs-progress", args=[second.code])).json()["waiting"] is None


@pytest.mark.django_db(transaction=True)
def test_a_run_waits_for_a_generator_a_bounded_while_then_fails_saying_who_held_it(
    owner, plain_server, settings
):
    """Not the broker for ever: tried again with a backoff while it waits, for at most
    TOLLGATE_GENERATOR_WAIT_S from its first wait, then failed with the host and the holding run."""
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 1
    settings.TOLLGATE_GENERATOR_WAIT_S = 600
    host = socket.gethostname()
    first, second = queued_run(owner, plain_server.url()), queued_run(owner, plain_server.url())
    assert runner.claim(first.pk) == runner.CLAIMED
    assert [slots.wait_retry_s(tries) for tries in range(6)] == [10, 20, 40, 60, 60, 60]
    since = timezone.now() - timedelta(minutes=9)
    waiting = runner.execute_run(second.pk, waiting_since=since)
    until = (since + timedelta(minutes=10)).strftime("%H:%M UTC")
    assert waiting.status == Run.Status.QUEUED
    assert waiting.waiting == f"waiting for a generator (1 running on {host}); tried until {until}"
    assert runner.execute_run(second.pk, waiting_since=since - timedelta(minutes=1)) is None
    second.refresh_from_db()
    assert second.status == Run.Status.FAILED and second.finished is not None and not second.started
    assert second.error == f"Not started: no generator free on {host} for 10 min: held by run {first.code}."
    assert second.waiting == "" and not second.attempts.exists() and hasattr(second, "frozen_report")
    assert Run.objects.get(pk=first.pk).status == Run.Status.RUNNING  # the holder goes on
    # The task carries when the run first waited through its retries (run eagerly here: each retry
    # at once): with no wait allowed, its second try fails the run.
    settings.TOLLGATE_GENERATOR_WAIT_S = 0
    third = queued_run(owner, plain_server.url())
    tasks.run_benchmark.apply(args=[third.pk])
    third.refresh_from_db()
    assert third.status == Run.Status.FAILED and f"held by run {first.code}" in third.error


@pytest.mark.django_db
def test_a_project_at_its_concurrency_waits_even_on_a_free_generator(owner, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 5
    ProjectQuota.objects.create(project=personal_project(owner), max_concurrent_runs=1)
    first, second = queued_run(owner), queued_run(owner)
    assert runner.claim(first.pk, host="elsewhere") == runner.CLAIMED
    assert runner.claim(second.pk) == runner.WAITING
    second.refresh_from_db()
    assert second.waiting == "waiting for a run of project owner to end (1 running)"
