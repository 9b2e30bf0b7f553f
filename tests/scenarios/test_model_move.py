"""The Scenario model moved from portal/targets to portal/scenarios by state alone: a database with
scenarios, runs of them and a webhook trigger, migrated forward from before the move, keeps every
row and every link, and the moved model reads the same table."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from portal.hooks.models import WebhookTrigger
from portal.runs.models import Run
from portal.scenarios.models import Scenario

BEFORE = [
    ("targets", "0008_scenario_budgets_scenario_callback_url_and_more"),
    ("runs", "0018_run_preflight_failed"),
    ("hooks", "0002_webhookdelivery_signature_idx"),
]


@pytest.mark.django_db(transaction=True)
def test_scenarios_runs_and_triggers_survive_the_move():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    user = old.get_model("auth", "User").objects.create(username="mover")
    project = old.get_model("projects", "Project").objects.create(name="p")
    target = old.get_model("targets", "Target").objects.create(
        project=project, name="t", plain_url="http://127.0.0.1:9/", tls_url=""
    )
    scenario = old.get_model("targets", "Scenario").objects.create(
        project=project, target=target, name="nightly", config={"users": 2}, version=3, budgets={"x": 1}
    )
    run = old.get_model("runs", "Run").objects.create(
        project=project, owner=user, target=target, scenario=scenario, config={}, scenario_version=3
    )
    old.get_model("hooks", "WebhookTrigger").objects.create(
        scenario=scenario, created_by=user, secret_enc="x"
    )

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    moved = Scenario.objects.get(pk=scenario.pk)
    assert (moved.name, moved.version, moved.config, moved.budgets, moved.target_id) == (
        "nightly",
        3,
        {"users": 2},
        {"x": 1},
        target.pk,
    )
    assert Run.objects.get(pk=run.pk).scenario == moved
    assert WebhookTrigger.objects.get(scenario=moved).created_by_id == user.pk
    assert Scenario._meta.db_table == "targets_scenario"
    assert list(moved.runs.values_list("pk", flat=True)) == [run.pk]
