"""Schedules fire through django-celery-beat's own scheduler: the test drives its tick, reads the task
it sent from the real Redis broker, runs that task's body, then the run it started."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from portal.projects.models import Membership, ProjectQuota
from portal.runs import reporting
from portal.runs.models import Run
from portal.schedules import firing, services
from portal.schedules.models import Firing
from tests.runs.factories import make_run
from tests.schedules.conftest import popped_tasks
from workers import tasks
from workers.celery_app import app


@pytest.mark.django_db
def test_a_schedule_is_a_beat_task_in_its_zone_and_the_next_run_follows_it(local_scenario, owner):
    schedule = services.set_schedule(local_scenario, owner, "daily at 02:00", "Europe/Berlin")
    task = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert task.task == "workers.tasks.fire_schedule" and task.enabled and task.queue == "maintenance"
    assert (task.crontab.minute, task.crontab.hour, str(task.crontab.timezone)) == ("0", "2", "Europe/Berlin")
    # 02:00 in Berlin is 01:00 UTC in winter and 00:00 UTC in summer.
    winter = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    assert services.next_run_at(schedule, winter) == datetime(2026, 1, 11, 1, 0, tzinfo=UTC)
    summer = datetime(2026, 7, 10, 23, 30, tzinfo=UTC)
    assert services.next_run_at(schedule, summer) == datetime(2026, 7, 11, 0, 0, tzinfo=UTC)
    # An edit changes the same task; removing it removes the task.
    again = services.set_schedule(local_scenario, owner, "*/30 * * * 1-5")
    assert (
        again.pk == schedule.pk and again.periodic_task_id == task.pk and again.time_zone == "Europe/Berlin"
    )
    assert PeriodicTask.objects.get(pk=task.pk).crontab.day_of_week == "1-5"
    with pytest.raises(services.ScheduleError, match="minute"):
        services.set_schedule(local_scenario, owner, "61 * * * *")
    assert services.clear_schedule(local_scenario) and not PeriodicTask.objects.filter(pk=task.pk).exists()
    assert not services.clear_schedule(local_scenario)
    # Deleting the scenario deletes its schedule, and the beat's task with it.
    again = services.set_schedule(local_scenario, owner, "daily at 03:00")
    local_scenario.delete()
    assert not PeriodicTask.objects.filter(pk=again.periodic_task_id).exists()


@pytest.mark.django_db(transaction=True)
def test_the_beat_tick_fires_the_schedule_and_the_run_reports_source_schedule(
    local_scenario, owner, maintenance_queue, tls_server
):
    schedule = services.set_schedule(local_scenario, owner, "* * * * *")
    # As if the beat last sent it two minutes ago: due at this tick.
    PeriodicTask.objects.filter(pk=schedule.periodic_task_id).update(
        last_run_at=timezone.now() - timedelta(minutes=2)
    )
    beat = DatabaseScheduler(app=app)
    beat.tick()
    sent = [t for t in popped_tasks(maintenance_queue) if t["task"] == "workers.tasks.fire_schedule"]
    assert len(sent) == 1 and sent[0]["kwargs"] == {"schedule_id": schedule.pk}
    tick = sent[0]
    assert tasks.fire_schedule.apply(kwargs=tick["kwargs"], task_id=tick["id"]).get() == "started"
    # The broker redelivers the tick (acks_late): nothing more starts.
    assert tasks.fire_schedule.apply(kwargs=tick["kwargs"], task_id=tick["id"]).get() is None
    [fired] = Firing.objects.filter(schedule=schedule)
    run = fired.run
    assert fired.outcome == "started" and run.source == "schedule" and run.owner == owner
    assert run.scenario_id == local_scenario.pk and run.status == Run.Status.QUEUED
    # The run queued for a run worker; measured here by the task body.
    assert [t["task"] for t in popped_tasks(maintenance_queue, "runs")] == ["workers.tasks.run_benchmark"]
    assert tasks.run_benchmark(run.pk) == "succeeded"
    run.refresh_from_db()
    report = reporting.export_report(run)
    assert report["run"]["source"] == "schedule" and tls_server.counters.snapshot()["handshakes"] > 0


@pytest.mark.django_db
def test_a_firing_is_skipped_while_the_previous_run_has_not_ended(local_scenario, owner):
    schedule = services.set_schedule(local_scenario, owner, "daily at 02:00")
    first = firing.fire(schedule.pk, "tick-1")
    assert first.outcome == "started"
    second = firing.fire(schedule.pk, "tick-2")
    assert second.outcome == "skipped" and second.run is None
    assert second.reason == f"the previous run {first.run.code} (started by schedule) is still queued"
    Run.objects.filter(pk=first.run.pk).update(status=Run.Status.SUCCEEDED, finished=timezone.now())
    assert firing.fire(schedule.pk, "tick-3").outcome == "started"
    assert Run.objects.filter(scenario=local_scenario, source="schedule").count() == 2


@pytest.mark.django_db
def test_a_scheduled_run_counts_against_the_quotas_and_a_refusal_is_logged(local_scenario, owner):
    project = local_scenario.project
    ProjectQuota.objects.create(project=project, max_runs_per_day=1)
    make_run(owner, project=project)  # today's one run, started by hand
    schedule = services.set_schedule(local_scenario, owner, "daily at 02:00")
    refused = firing.fire(schedule.pk, "tick-1")
    assert (
        refused.outcome == "refused"
        and refused.run is None
        and refused.reason.endswith("at most 1 a day (operator limit).")
    ), refused.reason
    assert not Run.objects.filter(source="schedule").exists()


@pytest.mark.django_db
def test_a_schedule_whose_owner_left_the_project_refuses(local_scenario, owner, django_user_model):
    leaver = django_user_model.objects.create_user("leaver", password="leaver-pass-123")
    Membership.objects.create(project=local_scenario.project, user=leaver, role="member")
    schedule = services.set_schedule(local_scenario, leaver, "daily at 02:00")
    Membership.objects.filter(user=leaver).delete()
    refused = firing.fire(schedule.pk, "tick-1")
    assert (
        refused.outcome == "refused" and "leaver may not start runs in owner (not a member)" in refused.reason
    )
    # Disabled: the tick does nothing at all.
    off = services.set_schedule(local_scenario, owner, "daily at 02:00", enabled=False)
    assert firing.fire(schedule.pk, "tick-2") is None and services.next_run_at(off) is None
