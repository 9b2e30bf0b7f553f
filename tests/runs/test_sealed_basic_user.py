"""A Basic-auth user name is half a credential: a run's stored config keeps it sealed with the
password (``config.secrets``), never in clear, and the engine still gets both, on its first attempt
and on the attempt that resumes a run."""

from __future__ import annotations

import base64
import importlib
import json
import threading
import time

import pytest
import requests
from django.apps import apps
from django.db import connection

from portal import vault
from portal.api import tokens
from portal.projects.models import personal_project
from portal.runs import configs, services
from portal.runs.models import ArmResult, Run
from tests.api.conftest import inline
from tests.conftest import reap_as_if_silent
from tests.engine_config import engine_config
from tests.runs.factories import make_run
from tests.servers import AuthPages, LocalServer
from workers import runner

NAME = "basil-0e6b"
SECRET = "pw-91c4-secret"
AUTH = {"type": "basic", "user": NAME, "secret": SECRET}
AUTHORIZATION = "Basic " + base64.b64encode(f"{NAME}:{SECRET}".encode()).decode()


def stored_config_text(run_code) -> str:
    """The run's config as PostgreSQL holds it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT config::text FROM runs_run WHERE code = %s", [run_code])
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_basic_auth_run_started_through_the_api_stores_no_user_name_in_clear(
    gunicorn_portal, owner, broker
):
    _, token = tokens.issue(owner, personal_project(owner), scope="run", name="ci")
    answer = requests.post(
        gunicorn_portal.base_url + "/api/v1/runs",
        json=inline(arms=["tls"], auth=AUTH),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 201, answer.text
    assert NAME not in answer.text and SECRET not in answer.text
    code = answer.json()["id"]

    text = stored_config_text(code)
    assert NAME not in text and SECRET not in text
    config = json.loads(text)
    assert config["auth"] == {"type": "basic"}
    # Sealed with the password, where the engine's config is made from.
    assert vault.unseal(config["secrets"])["auth"] == AUTH
    assert configs.engine_dict(config, with_secrets=True)["headers"]["Authorization"] == AUTHORIZATION


@pytest.mark.django_db(transaction=True)
def test_a_resumed_basic_auth_run_still_sends_the_user_on_every_request(owner):
    guard = AuthPages(AUTHORIZATION)
    server = LocalServer(app=guard).start()
    try:
        target = services.get_or_create_target(personal_project(owner), "guarded", server.url("/1k"), "")
        config = engine_config(
            {"plain": server.url("/1k")}, warmup_s=0.3, rounds=4, arrival_rate=100, headers_over_http=True
        )
        run = services.create_run(owner, target, config, secrets={"auth": AUTH})
        assert NAME not in stored_config_text(run.code)

        thread = threading.Thread(target=_execute, args=(run.pk,))
        thread.start()
        deadline = time.monotonic() + 60
        while not ArmResult.objects.filter(run=run).exists():
            run.refresh_from_db()
            assert time.monotonic() < deadline and thread.is_alive(), (run.status, run.error)
            time.sleep(0.1)
        # As if the worker had gone silent: the reaper puts the run back; another attempt resumes it.
        reap_as_if_silent(run)
        thread.join(timeout=60)
        assert not thread.is_alive()
        run = runner.execute_run(run.pk, worker="celery@second")
    finally:
        server.stop()
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert [a.outcome for a in run.attempts.all()] == ["lost", Run.Status.SUCCEEDED]
    assert ArmResult.objects.filter(run=run).count() == 4
    # Every request of both attempts, the preflight's too, carried the user and password.
    assert guard.refused == 0 and sum(guard.by_path.values()) > 100
    assert NAME not in stored_config_text(run.code)


def _execute(run_id: int) -> None:
    try:
        runner.execute_run(run_id)
    finally:
        connection.close()


@pytest.mark.django_db
def test_the_migration_takes_the_clear_user_name_out_of_runs_stored_before(owner):
    run = make_run(owner)
    sealed = configs.seal_into(run.config, {"auth": AUTH})
    before = {**sealed, "auth": {"type": "basic", "user": NAME}}  # as runs were stored until now
    Run.objects.filter(pk=run.pk).update(config=before)
    other = make_run(owner)

    migration = importlib.import_module("portal.runs.migrations.0026_basic_auth_user_sealed_only")
    migration.drop_clear_user(apps, None)

    run.refresh_from_db()
    assert run.config == sealed and NAME not in stored_config_text(run.code)
    assert vault.unseal(run.config["secrets"])["auth"] == AUTH
    assert Run.objects.get(pk=other.pk).config == other.config
