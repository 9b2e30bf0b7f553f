"""Where headers and credentials go: a saved scenario's only to the origins it was saved for, and
none over plain HTTP unless the user ticked it. Proven on real servers that log what they got."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal import vault
from portal.projects.models import personal_project
from portal.runs import services
from portal.runs.forms import RunForm
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.targets.models import Target
from tests.engine_config import engine_config
from tests.servers import HeaderLog, LocalServer
from workers import runner

TLS_ONLY = {
    "tls_url": "https://127.0.0.1:8443/1k",
    "arms": ["tls"],
    "users": "1",
    "spawn_rate": "1",
    "warmup_s": "0",
    "duration_s": "1",
}
SECRETS = {
    "headers": "X-Api-Key: key-71c2",
    "auth_type": "basic",
    "auth_user": "auditor",
    "auth_secret": "pw",
}


@pytest.mark.parametrize(
    ("arms", "tick", "valid"),
    [
        (["tls", "tls_new"], False, True),
        (["plain", "tls"], False, False),
        (["plain_new"], False, False),
        (["plain", "tls"], True, True),
    ],
)
def test_secrets_go_over_plain_http_only_when_ticked(arms, tick, valid):
    data = {**TLS_ONLY, **SECRETS, "plain_url": "http://127.0.0.1:8081/1k", "arms": arms}
    if tick:
        data["send_credentials_over_http"] = "on"
    form = RunForm(data)
    assert form.is_valid() is valid, form.errors
    if valid:
        assert form.engine_config()["headers_over_http"] is tick
    else:
        message = form.errors["send_credentials_over_http"][0]
        assert "would send the headers and credentials unencrypted" in message


def test_a_run_without_secrets_needs_no_tick():
    form = RunForm({**TLS_ONLY, "plain_url": "http://127.0.0.1:8081/1k", "arms": ["plain", "tls"]})
    assert form.is_valid(), form.errors


@pytest.fixture
def saved(client, owner, broker, django_capture_on_commit_callbacks) -> Scenario:
    """A scenario with headers and Basic credentials, saved for https://127.0.0.1:8443."""
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("runs-new"), {**TLS_ONLY, **SECRETS, "save_as": "guarded"})
    assert response.status_code == 302
    scenario = Scenario.objects.get(name="guarded")
    assert scenario.config["secret_origins"] == ["https://127.0.0.1:8443"]
    return scenario


@pytest.fixture
def rerun(client, saved, django_capture_on_commit_callbacks):
    """Start a run from the saved scenario with the secret fields left blank (unless given)."""

    def post(**fields):
        data = {**TLS_ONLY, "scenario": str(saved.code), "auth_type": "basic", "auth_user": "auditor"}
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(reverse("runs-new"), {**data, **fields})

    return post


@pytest.mark.django_db
@pytest.mark.parametrize(
    "tls_url",
    [
        "https://127.0.0.2:8443/1k",  # another host, the same port
        "https://127.0.0.1/1k",
        "https://127.0.0.1:9443/1k",
        "https://[::1]:8443/",
    ],
)
def test_saved_credentials_are_not_sent_to_another_origin(rerun, tls_url):
    response = rerun(tls_url=tls_url)
    assert response.status_code == 200
    errors = response.context["form"].errors
    for field in ("auth_secret", "headers"):
        assert "belong to https://127.0.0.1:8443; enter them again for https://" in errors[field][0], errors
    assert Run.objects.count() == 1  # only the run that saved the scenario


@pytest.mark.django_db
def test_saved_credentials_are_kept_for_their_own_origin(rerun):
    response = rerun(tls_url="https://127.0.0.1:8443/4k")  # another path, the same origin
    assert response.status_code == 302, response.context["form"].errors
    opened = vault.unseal(Run.objects.latest("pk").config["secrets"])
    assert opened["auth"]["secret"] == "pw" and opened["headers"] == {"X-Api-Key": "key-71c2"}


@pytest.mark.django_db
def test_credentials_typed_again_may_go_to_another_origin(rerun):
    response = rerun(tls_url="https://127.0.0.3/1k", auth_secret="pw-other", headers="X-Api-Key: other")
    assert response.status_code == 302, response.context["form"].errors
    opened = vault.unseal(Run.objects.latest("pk").config["secrets"])
    assert opened["auth"]["secret"] == "pw-other" and opened["headers"] == {"X-Api-Key": "other"}


@pytest.mark.django_db
def test_a_scenario_saved_before_origins_were_recorded_keeps_its_own_urls(rerun, saved):
    del saved.config["secret_origins"]
    saved.save()
    response = rerun(tls_url="https://127.0.0.2:8443/")
    assert response.status_code == 200 and "belong to https://127.0.0.1:8443" in response.content.decode()
    assert rerun(tls_url="https://127.0.0.1:8443/2k").status_code == 302


@pytest.fixture
def logged(tls_cert):
    plain_log, tls_log = HeaderLog(), HeaderLog()
    plain = LocalServer(app=plain_log).start()
    tls = LocalServer(tls=tls_cert, app=tls_log).start()
    yield plain, plain_log, tls, tls_log
    plain.stop()
    tls.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("over_http", [False, True])
def test_the_plain_server_never_sees_credentials_unless_allowed(owner, logged, over_http):
    plain, plain_log, tls, tls_log = logged
    target = Target.objects.create(
        project=personal_project(owner), name="t", plain_url=plain.url(), tls_url=tls.url()
    )
    config = engine_config(
        {"plain": plain.url(), "tls": tls.url()}, headers_over_http=over_http, arrival_rate=60
    )
    secrets = {"headers": {"X-Api-Key": "key-71c2"}, "auth": {"type": "bearer", "user": "", "secret": "tok"}}
    run = runner.execute_run(services.create_run(owner, target, config, secrets=secrets).pk)
    assert run.status == Run.Status.SUCCEEDED, run.error
    assert len(tls_log.seen) > 10 and len(plain_log.seen) > 10
    # Every TLS request carried them, the preflight's included.
    assert tls_log.with_header("authorization") == tls_log.with_header("x-api-key") == len(tls_log.seen)
    expected = len(plain_log.seen) if over_http else 0
    assert plain_log.with_header("authorization") == plain_log.with_header("x-api-key") == expected
