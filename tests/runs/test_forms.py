from __future__ import annotations

import pytest

from portal.runs.forms import RunForm


def data(**overrides) -> dict:
    base = {
        "plain_url": "http://127.0.0.1:8081/1k",
        "tls_url": "https://127.0.0.1:8443/1k",
        "arms": ["plain", "tls", "tls_new"],
        "users": 4,
        "spawn_rate": 4,
        "warmup_s": 1,
        "duration_s": 5,
        "verify_tls": "",
    }
    base.update(overrides)
    return base


def test_valid_form_builds_engine_config_in_canonical_arm_order():
    form = RunForm(data(arms=["tls_new", "plain", "tls"]))
    assert form.is_valid(), form.errors
    config = form.engine_config()
    assert [a["name"] for a in config["arms"]] == ["plain", "tls", "tls_new"]
    assert config["arms"][0]["url"] == "http://127.0.0.1:8081/1k"
    assert config["arms"][2]["url"] == "https://127.0.0.1:8443/1k"
    assert config["verify_tls"] is False
    # Named by where it is: host, port and path (two demo-like targets on one host stay apart).
    assert form.target_name_or_default() == "127.0.0.1:8443/1k"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"plain_url": "https://127.0.0.1/x"}, "plain_url", "Needs an http:// URL"),
        ({"tls_url": "http://127.0.0.1/x"}, "tls_url", "Needs an https:// URL"),
        ({"tls_url": "not a url"}, "tls_url", "Enter a valid URL"),
        ({"tls_url": ""}, "tls_url", "Required for the arm(s) tls, tls_new"),
        ({"plain_url": "", "arms": ["plain"]}, "plain_url", "Required for the arm(s) plain"),
        ({"plain_url": "http://u:p@127.0.0.1/"}, "plain_url", "credentials"),
        ({"users": 0}, "users", "greater than or equal to 1"),
        ({"users": 10_000}, "users", "At most 500 users in project (none) (operator limit)."),
        ({"duration_s": 0.5}, "duration_s", "greater than or equal to 1"),
        ({"duration_s": 100_000}, "duration_s", "At most 3600 s of measurement per arm"),
        ({"warmup_s": -1}, "warmup_s", "greater than or equal to 0"),
        ({"arms": []}, "arms", "This field is required"),
        ({"arms": ["bogus"]}, "arms", "Select a valid choice"),
    ],
)
def test_bad_input_gets_a_field_error(overrides, field, message):
    form = RunForm(data(**overrides))
    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors


def test_tls_only_run_needs_no_plain_url():
    form = RunForm(data(plain_url="", arms=["tls", "tls_new"]))
    assert form.is_valid(), form.errors


def test_scenario_options_become_engine_config_and_sealed_secrets():
    form = RunForm(
        data(
            paths="/1k\n/2k 2\n# a comment\n/4k 0.5\n",
            headers="Accept-Language: en\nX-Client: 100",
            auth_type="basic",
            auth_user="auditor",
            auth_secret="s3cret",
            expected_status="200, 204",
            think_time_s=0.1,
            rounds=3,
            arrival_rate="",
            follow_redirects="on",
            send_credentials_over_http="on",  # the plain arm gets them too, as the user said
        )
    )
    assert form.is_valid(), form.errors
    config = form.engine_config()
    assert config["headers_over_http"] is True
    assert config["paths"] == [
        {"path": "/1k", "weight": 1.0},
        {"path": "/2k", "weight": 2.0},
        {"path": "/4k", "weight": 0.5},
    ]
    assert config["expected_status"] == [200, 204]
    assert (config["think_time_s"], config["rounds"], config["arrival_rate"]) == (0.1, 3, None)
    assert config["follow_redirects"] is True
    # Secrets never go into the engine config the form returns: they are sealed separately.
    assert "headers" not in config and "s3cret" not in str(config)
    assert form.secrets() == {
        "headers": {"Accept-Language": "en", "X-Client": "100"},
        "auth": {"type": "basic", "user": "auditor", "secret": "s3cret"},
    }


def test_status_classes_expand():
    form = RunForm(data(expected_status="2xx 301"))
    assert form.is_valid(), form.errors
    codes = form.engine_config()["expected_status"]
    assert len(codes) == 101 and codes[0] == 200 and codes[-1] == 301


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"paths": "1k"}, "paths", "must start with /"),
        ({"paths": "/1k heavy"}, "paths", "is not a number"),
        ({"paths": "/1k 0"}, "paths", "above 0"),
        ({"headers": "no colon here"}, "headers", "expected 'Name: value'"),
        ({"headers": "Host: evil"}, "headers", "set by Tollgate"),
        ({"headers": "Authorization: Basic x"}, "headers", "Authentication fields"),
        ({"auth_type": "basic", "auth_secret": "x"}, "auth_user", "needs a user"),
        ({"auth_type": "basic", "auth_user": "a:b", "auth_secret": "x"}, "auth_user", "cannot contain ':'"),
        ({"auth_type": "bearer"}, "auth_secret", "Enter the password or token"),
        ({"expected_status": "ok"}, "expected_status", "is not a status code"),
        ({"expected_status": "600"}, "expected_status", "is not a status code"),
        ({"rounds": 0}, "rounds", "greater than or equal to 1"),
        ({"rounds": 99}, "rounds", "At most 20 rounds"),
        ({"arrival_rate": 0}, "arrival_rate", "greater than or equal to 0.1"),
        ({"think_time_s": -1}, "think_time_s", "greater than or equal to 0"),
    ],
)
def test_bad_scenario_options_get_field_errors(overrides, field, message):
    form = RunForm(data(**overrides))
    assert not form.is_valid()
    assert message in " ".join(form.errors[field]), form.errors
