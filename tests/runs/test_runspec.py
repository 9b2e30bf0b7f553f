"""One definition of a run (portal/lib/runs/runspec.py): every field of ``RunSpec`` is offered by each
surface — the run form, the API's schema and its validation, the CLI, a scenario's overrides and
the engine config — with the spec's bounds, default and error wording; and a field added to a copy
of the spec appears on every surface without another file changing."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from django import forms
from django.core.management import CommandError, call_command
from pydantic import create_model

from portal.api import tokens
from portal.api.serializers import InlineRunIn, inline_run_fields
from portal.console import run_options as cli_options
from portal.lib.report import compare
from portal.lib.runs import protocol, runspec
from portal.projects.models import personal_project
from portal.runs import starting
from portal.runs.fields import form_fields
from portal.runs.forms import CUSTOM_FIELDS, RunForm
from portal.runs.models import Run

OPTIONS = runspec.OPTIONS
NUMBERS = [key for key, opt in OPTIONS.items() if opt.kind in ("int", "float")]
PLAIN = "http://127.0.0.1:8081/1k"
TLS = "https://127.0.0.1:8443/1k"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    cli_options.add_run_arguments(parser)
    cli_options.add_tuning_arguments(parser)
    return parser


def test_every_field_is_offered_by_every_surface():
    form = RunForm()
    api = InlineRunIn().fields
    cli = {action.option_strings[0]: action for action in _parser()._actions if action.option_strings}
    engine = {field.name for field in dataclasses.fields(protocol.EngineConfig)}
    compared = {key for key, _ in compare.SETUP_KEYS}
    for key, opt in OPTIONS.items():
        assert opt.label and (opt.help or opt.description), key
        assert key in api and key in starting.KEYS, key
        assert all(name in form.fields for name in CUSTOM_FIELDS.get(key, (opt.form_name,))), key
        if opt.cli and opt.kind != "custom":
            assert opt.cli in cli, key
            assert cli_options.RUN_OPTIONS[opt.form_name] == opt.cli
        assert (key in starting.OVERRIDABLE) == opt.overridable, key
        if opt.engine:
            assert key in engine, f"{key} is no field of EngineConfig"
            assert key in compared, f"compare does not list {key} among the setup differences"


@pytest.mark.parametrize("key", NUMBERS)
def test_numbers_have_the_same_bounds_and_default_everywhere(key):
    opt = OPTIONS[key]
    field = RunForm().fields[opt.form_name]
    api = InlineRunIn().fields[key]
    cli = {a.option_strings[0]: a for a in _parser()._actions if a.option_strings}[opt.cli]
    assert (field.min_value, field.max_value) == (opt.bounds.get("ge"), opt.bounds.get("le"))
    assert (api.min_value, api.max_value) == (opt.bounds.get("ge"), opt.bounds.get("le"))
    assert field.initial == opt.default == cli.default == starting.default_form_data()[opt.form_name]
    schema = runspec.RunSpec.model_json_schema()["properties"][key]
    assert schema.get("default") == opt.default
    assert schema.get(
        "minimum", next((s.get("minimum") for s in schema.get("anyOf", [])), None)
    ) == opt.bounds.get("ge")


ARMS = [{"name": "plain", "url": PLAIN}]


def test_the_engine_config_is_made_from_the_spec():
    """EngineConfig has a field per engine option, in the spec's order, with the spec's default; the
    engine refuses a value past the spec's bound (its own where the option gives one), naming it."""
    fields = [field.name for field in dataclasses.fields(protocol.EngineConfig)]
    engine_only = {"arms", "timeout_s", "headers", "pinned", "client_certs", "skip"}  # no run options
    engine_only |= {"master_bind", "master_port", "generator_connect_s", "max_generators", "remote_hosts"}
    assert [key for key in fields if key not in engine_only] == list(runspec.ENGINE_KEYS)
    assert fields[0] == "arms" and set(fields) - set(runspec.ENGINE_KEYS) == engine_only
    config = protocol.EngineConfig.from_dict({"arms": ARMS})
    for key in runspec.ENGINE_KEYS:
        assert getattr(config, key) == OPTIONS[key].default, key
    checked = 0
    for key in runspec.ENGINE_KEYS:
        bounds, step = OPTIONS[key].engine_bounds, 1 if OPTIONS[key].engine_type is int else 0.5
        for name, past in (("ge", -step), ("gt", 0), ("le", step)):
            if name in bounds:
                with pytest.raises(ValueError, match=f"^{key}: Input should be (greater|less) than"):
                    protocol.EngineConfig.from_dict({"arms": ARMS, key: bounds[name] + past})
                checked += 1
    assert checked >= 8  # users, spawn_rate (2), warmup_s, duration_s, think_time_s (2), arrival_rate, …
    # Where the engine takes more than the form: a sub-second window (tests), generators 0 ("auto").
    assert OPTIONS["duration_s"].bounds["ge"] == 1
    assert (
        protocol.EngineConfig.from_dict({"arms": ARMS, "duration_s": 0.3, "generators": 0}).duration_s == 0.3
    )
    with pytest.raises(ValueError, match="^tls_library: Input should be 'system' or 'bundled'"):
        protocol.EngineConfig.from_dict({"arms": ARMS, "tls_library": "boring"})


def _below(opt) -> float:
    return opt.bounds["ge"] - (1 if opt.kind == "int" else opt.bounds["ge"] / 2 or 1)


@pytest.mark.django_db
@pytest.mark.parametrize("key", [key for key in NUMBERS if "ge" in OPTIONS[key].bounds])
def test_a_value_below_the_bound_gets_the_same_words_on_every_surface(key, client, django_user_model):
    """The form's field error, the API's JSON error (400, under the JSON key), a scenario override
    and the CLI's message carry the same sentence."""
    opt = OPTIONS[key]
    bad = _below(opt)
    words = f"Ensure this value is greater than or equal to {opt.bounds['ge']}."
    form = RunForm({**starting.default_form_data(), "plain_url": PLAIN, "tls_url": TLS, opt.form_name: bad})
    assert words in form.errors[opt.form_name]

    owner = django_user_model.objects.create_user("spec", password="x" * 20)
    project = personal_project(owner)
    _, secret = tokens.issue(owner, project, scope="run", name="ci")
    answer = client.post(
        "/api/v1/runs",
        {"plain_url": PLAIN, "tls_url": TLS, key: bad},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert answer.status_code == 400 and words in answer.json()["errors"][key]

    scenario = starting.save_scenario(project, "spec", {"plain_url": PLAIN, "tls_url": TLS})
    if opt.overridable:
        with pytest.raises(starting.RunRefused) as refused:
            starting.check(project, {key: bad}, scenario=scenario)
        assert words in refused.value.errors[key]

    flag = f"{opt.cli}={bad}"
    with pytest.raises(CommandError) as failed:
        call_command("tollgate", "run", f"--plain-url={PLAIN}", f"--tls-url={TLS}", flag, "--owner=spec")
    assert f"{opt.cli}: {words}" in str(failed.value)
    assert Run.objects.count() == 0


def test_a_field_added_to_the_spec_appears_on_every_surface():
    """What a new option costs: its field in RunSpec; the form, the API schema, the CLI, the
    override list, the JSON keys, the engine's config and compare's setup keys follow (the engine
    code that acts on it reads it from its config; docs/architecture.md, "What a new option
    touches")."""
    extra = runspec._field(
        4,
        ge=1,
        le=100,
        label="Streams per connection",
        help="HTTP/2 streams each connection carries.",
        cli="--streams",
        cli_help="HTTP/2 streams per connection",
        overridable=True,
        engine=True,
    )
    spec = create_model("WiderSpec", __base__=runspec.RunSpec, streams=(int, extra))
    opt = runspec.options(spec)["streams"]
    assert (opt.kind, opt.default, opt.bounds, opt.overridable) == ("int", 4, {"ge": 1, "le": 100}, True)

    field = form_fields(spec)["streams"]
    assert isinstance(field, forms.IntegerField)
    assert (field.min_value, field.max_value, field.initial, field.label) == (1, 100, 4, opt.label)
    with pytest.raises(forms.ValidationError) as error:
        field.clean("101")
    assert "Ensure this value is less than or equal to 100." in error.value.messages

    api = inline_run_fields(spec)["streams"]
    assert (api.min_value, api.max_value, api.help_text) == (1, 100, opt.description)

    parser = argparse.ArgumentParser()
    cli_options.add_spec_argument(parser, opt)
    assert parser.parse_args([]).streams == 4 and parser.parse_args(["--streams", "8"]).streams == 8
    assert runspec.defaults(spec)["streams"] == 4

    engine = protocol.config_class(runspec.options(spec))
    assert (
        engine.from_dict({"arms": ARMS}).streams == 4
        and engine.from_dict({"arms": ARMS, "streams": 8}).streams == 8
    )
    with pytest.raises(ValueError, match="^streams: Input should be less than or equal to 100"):
        engine.from_dict({"arms": ARMS, "streams": 101})

    keys = dict(compare.setup_keys(runspec.options(spec)))
    run = {"target": {"name": "t", "plain_url": PLAIN, "tls_url": TLS}, "config": {"streams": 8}}
    assert keys["streams"]({"run": run}) == 8 and keys["streams"]({"run": {**run, "config": {}}}) == 4
