"""A dead run does not hold the generator. With no reaper about (a bare host, the CLI alone), a run
waiting for a slot held by a run whose heartbeat went silent ends that run as the reaper would (failed
when no worker could resume it, back in the queue when one could) and starts at once, saying which
run it found dead; a holder whose heartbeat is fresh still makes it wait."""

from __future__ import annotations

import io
import socket
from datetime import timedelta

import pytest
import redis
from django.core.management import call_command
from django.utils import timezone

from portal.projects.models import ProjectQuota, personal_project
from portal.runs import services
from portal.runs.models import Run, RunAttempt, WorkerSeen
from tests.engine_config import engine_config
from workers import runner

pytestmark = pytest.mark.django_db(transaction=True)

HOST = socket.gethostname()


def _config(url: str) -> dict:
    return engine_config(
        {"plain": url},
        warmup_s=0.3,
        arrival_rate=100,  # open loop: samples enough, without a core burnt flat out beside other tests
    )


def _queued(owner, url: str, name: str = "local") -> Run:
    target = services.get_or_create_target(personal_project(owner), name, url, "")
    return services.create_run(owner, target, _config(url))


def _holder(owner, url: str, *, silent_s: float, host: str = HOST) -> Run:
    """A run claimed on ``host`` by an executor (a CLI, say) whose heartbeat has been silent for
    ``silent_s`` since, in the middle of its first arm."""
    run = _queued(owner, url, "held")
    assert runner.claim(run.pk, host=host, worker="cli@gone") == runner.CLAIMED
    RunAttempt.objects.filter(run=run).update(
        heartbeat=timezone.now() - timedelta(seconds=silent_s), current_arm="plain (measure)"
    )
    return Run.objects.get(pk=run.pk)


class _NeverWaits(io.StringIO):
    """The CLI's stderr: a run that waits for the generator fails the test at once (the CLI would
    otherwise try again every 10 s for ever)."""

    def write(self, text: str) -> int:
        if "waiting for a generator" in text:
            raise AssertionError(f"the CLI waited: {text}")
        return super().write(text)


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")


def test_a_cli_run_ends_a_dead_holder_and_starts_at_once(admin, owner, plain_server, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 1
    dead = _holder(owner, plain_server.url(), silent_s=600)
    err = _NeverWaits()
    call_command(
        "tollgate", "run", "--plain-url", plain_server.url(), "--arms", "plain", "--users", "1",
        "--warmup", "0.3", "--duration", "1", "--arrival-rate", "100", stdout=io.StringIO(), stderr=err,
    )  # fmt: skip
    run = Run.objects.get(owner=admin)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert run.attempts.get().host == HOST and run.arms.get().requests > 0
    said = err.getvalue()
    dead.refresh_from_db()
    lost = dead.attempts.get()
    # Ended as the reaper ends a run no worker can resume: failed, with the reaper's reason (the lost
    # worker, its arm and its last heartbeat), who found it, and why it was not put back in the queue.
    assert dead.status == Run.Status.FAILED and dead.finished is not None
    assert dead.error.startswith(
        f"worker cli@gone pid {lost.worker.rpartition(' pid ')[2]} lost (no heartbeat"
    )
    assert "during arm plain (measure)" in dead.error
    assert f"found dead by run {run.code}, which waited for its slot on {HOST}" in dead.error
    assert "no worker consuming the runs queue to resume it" in dead.error
    assert lost.outcome == "lost" and "found dead by run" in lost.reason and lost.ended is not None
    assert dead.summary is not None  # ended with its summary, as any ended run
    # The waiting run said which run it found dead and that it ended it.
    assert f"run {run.code}: found run {dead.code} dead on {HOST}; failed it (worker cli@gone" in said


def test_with_a_worker_present_the_dead_holder_goes_back_in_the_queue(owner, plain_server, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 1
    WorkerSeen.objects.create(name="celery@here", host=HOST, queues=["runs"], last_seen=timezone.now())
    dead = _holder(owner, plain_server.url(), silent_s=600)
    waiting = _queued(owner, plain_server.url())
    queued_before = redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("runs")
    said: list[str] = []
    assert runner.claim(waiting.pk, say=said.append) == runner.CLAIMED
    dead.refresh_from_db()
    # Resumable: its one attempt ended, its next claim opens attempt 2.
    assert dead.status == Run.Status.QUEUED and dead.attempts.get().ended is not None
    assert dead.waiting.startswith("resuming: worker cli@gone pid ")
    assert f"found dead by run {waiting.code}" in dead.waiting
    assert (
        redis.Redis.from_url(settings.CELERY_BROKER_URL).llen("runs") == queued_before + 1
    )  # task sent again
    assert said == [f"run {waiting.code}: found run {dead.code} dead on {HOST}; put it back in the queue to "
                    f"resume ({dead.waiting.removeprefix('resuming: ')})"]  # fmt: skip


def test_a_holder_with_a_fresh_heartbeat_still_blocks(owner, plain_server, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 1
    alive = _holder(owner, plain_server.url(), silent_s=settings.TOLLGATE_REAP_SILENCE_S / 3)
    waiting = _queued(owner, plain_server.url())
    said: list[str] = []
    assert runner.claim(waiting.pk, say=said.append) == runner.WAITING
    waiting.refresh_from_db()
    assert waiting.waiting == f"waiting for a generator (1 running on {HOST})" and not said
    alive.refresh_from_db()
    assert alive.status == Run.Status.RUNNING and alive.error == ""
    assert [(a.number, a.ended) for a in alive.attempts.all()] == [(1, None)]


def test_a_dead_run_of_the_project_on_another_host_frees_the_projects_slot(owner, plain_server, settings):
    settings.TOLLGATE_MAX_RUNS_PER_GENERATOR = 5
    ProjectQuota.objects.create(project=personal_project(owner), max_concurrent_runs=1)
    dead = _holder(owner, plain_server.url(), silent_s=600, host="elsewhere")
    waiting = _queued(owner, plain_server.url())
    said: list[str] = []
    assert runner.claim(waiting.pk, say=said.append) == runner.CLAIMED
    dead.refresh_from_db()
    assert dead.status == Run.Status.FAILED and f"found dead by run {waiting.code}" in dead.error
    assert said and said[0].startswith(
        f"run {waiting.code}: found run {dead.code} dead on elsewhere; failed it"
    )
