"""Starting runs from JSON (the API, webhooks): the same checks as the run form, refusals under the
JSON names, nothing created when refused."""

from __future__ import annotations

import pytest

from portal.projects.models import personal_project
from portal.runs import starting
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.targets.models import Target

pytestmark = pytest.mark.django_db

PLAIN, TLS = "http://127.0.0.1:9/1k", "https://127.0.0.1:9/1k"


@pytest.fixture
def project(owner):
    return personal_project(owner)


@pytest.fixture
def queued(broker):
    """Runs are queued on the real broker; the test only counts them."""
    return broker


def test_form_data_turns_report_config_keys_into_form_values():
    data = starting.form_data(
        {
            "plain_url": PLAIN,
            "arms": [{"name": "plain", "url": PLAIN}, "tls"],
            "paths": [{"path": "/1k", "weight": 2}, {"path": "/2k"}],
            "expected_status": [200, 204],
            "headers": {"X-Client": "ci"},
            "auth": {"type": "bearer", "secret": "t0ken"},
            "probes": {"ssh": True, "openssl_speed": True},
            "headers_over_http": True,
            "arrival_rate": None,
        }
    )
    assert data["arms"] == ["plain", "tls"]
    # The JSON lists go to the form as they are (portal.lib.runs.runspec), never written out as text.
    assert data["paths"] == [{"path": "/1k", "weight": 2}, {"path": "/2k"}]
    assert data["expected_status"] == [200, 204]
    assert data["headers"] == "X-Client: ci"
    assert (data["auth_type"], data["auth_secret"]) == ("bearer", "t0ken")
    assert (data["probe_server"], data["openssl_speed"], data["cryptsetup"]) == (True, True, False)
    assert data["send_credentials_over_http"] is True
    assert data["arrival_rate"] == ""  # closed loop
    assert data["verify_tls"] is True and data["follow_redirects"] is True  # the form's defaults


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ({"plain_url": PLAIN, "colour": "red"}, "colour", "Unknown field"),
        ({"arms": "plain"}, "arms", "list of arm names"),
        ({"users": [1, 2]}, "users", "single value"),
        ({"paths": 7}, "paths", "list or a string"),
        ({"auth": "secret"}, "auth", "object"),
    ],
)
def test_malformed_json_is_refused_under_its_key(body, key, words, project):
    with pytest.raises(starting.RunRefused) as refused:
        starting.start_run(project.memberships.first().user, project, body)
    assert words in " ".join(refused.value.errors[key])
    assert Run.objects.count() == 0


def test_the_form_checks_apply_and_name_the_json_keys(owner, project, settings):
    settings.TOLLGATE_MAX_USERS = 10
    body = {"plain_url": "http://192.0.2.1/", "arms": ["plain"], "users": 11}
    with pytest.raises(starting.RunRefused) as refused:
        starting.start_run(owner, project, body)
    errors = refused.value.errors
    assert "192.0.2.1" in " ".join(errors["plain_url"])  # the outbound policy, as in the form
    assert "10" in " ".join(errors["users"])  # the project's limit
    assert Run.objects.count() == 0 and Target.objects.count() == 0


def test_credentials_never_go_over_http_unless_asked(owner, project):
    body = {"plain_url": PLAIN, "arms": ["plain"], "headers": {"X-Key": "k"}}
    with pytest.raises(starting.RunRefused) as refused:
        starting.start_run(owner, project, body)
    assert "unencrypted" in " ".join(refused.value.errors["headers_over_http"])


def test_an_inline_run_is_created_and_queued(owner, project, queued):
    run = starting.start_run(owner, project, {"plain_url": PLAIN, "tls_url": TLS, "arms": ["plain", "tls"]})
    assert run.source == "api" and run.scenario is None
    assert run.arm_names == ["plain", "tls"]
    assert run.config["users"] == 12 and run.config["arrival_rate"] == 60.0  # the paced default


def test_a_scenario_takes_overrides_within_limits_and_records_its_version(owner, project, queued, settings):
    scenario = starting.save_scenario(
        project, "ci", {"plain_url": PLAIN, "tls_url": TLS, "arms": ["plain", "tls"]}
    )
    assert scenario.version == 1
    scenario = starting.save_scenario(
        project,
        "ci",
        {"plain_url": PLAIN, "tls_url": TLS, "arms": ["plain", "tls"], "users": 3},
        scenario=scenario,
    )
    assert scenario.version == 2 and scenario.config["users"] == 3
    run = starting.start_run(owner, project, {"duration_s": 5}, scenario=scenario, source="webhook")
    assert (run.scenario_id, run.scenario_version) == (scenario.pk, 2)
    assert run.config["duration_s"] == 5 and run.config["users"] == 3
    with pytest.raises(starting.RunRefused) as refused:
        starting.start_run(owner, project, {"tls_url": "https://127.0.0.2/"}, scenario=scenario)
    assert "Not overridable" in refused.value.errors["tls_url"][0]
    settings.TOLLGATE_MAX_DURATION_S = 10
    with pytest.raises(starting.RunRefused) as refused:
        starting.start_run(owner, project, {"duration_s": 11}, scenario=scenario)
    assert "duration_s" in refused.value.errors
    assert Scenario.objects.get(pk=scenario.pk).version == 2
