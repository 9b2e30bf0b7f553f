"""The run form (portal/runs/forms.py, fields.py) on random input.

Its text parsers return their documented shape or raise their documented error with a message.
``POST /runs/new/`` by a logged-in project member, with every field possibly random (numbers as
``nan`` or ``1e309``, URLs with brackets and credentials, headers with control characters, a saved
scenario's id or garbage) answers a redirect to the new run, the form again with every error shown
on the page, or a 400 saying why — never a 500, and never a run from a refused form.
"""

from __future__ import annotations

import math
import re

import pytest
from django import forms
from django.test import Client
from django.utils.html import escape
from hypothesis import example, given
from hypothesis import strategies as st

from portal.lib.runs import protocol
from portal.lib.stats import wan
from portal.projects.access import SESSION_KEY
from portal.projects.models import Membership, Project, ProjectQuota, Role
from portal.runs import fields, starting
from portal.runs.forms import RunForm
from portal.runs.models import Run
from tests.fuzz.budget import count, fuzz
from tests.fuzz.strategies import mostly
from tests.runs.factories import VALID_FORM

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
NUMBER_TEXT = st.one_of(
    st.integers(-10, 10**7).map(str),
    st.floats().map(repr),
    st.sampled_from(["", "1e309", "-0", "0x10", "1_000", " 3 ", "٣", "NaN", "Infinity", "0.0001", "2"]),
    TEXT,
)
URLS = st.one_of(
    st.sampled_from(
        [
            "http://127.0.0.1:8081/1k", "https://127.0.0.1:8443/1k", "http://[::1]:8081/", "https://localhost/",
            "http://[::1/", "http://127.0.0.1:99999/", "https://u:p@127.0.0.1/", "http://10.0.0.1/",
            "javascript:alert(1)", "http://exämple.com/", "http://127.0.0.1/#x", "//127.0.0.1/", "http://",
            "",
            "http://nowhere.invalid/", "https://127.0.0.1:0/", "http://0x7f000001/", "http://127.1/",
        ]
    ),
    st.builds("http://127.0.0.1:{}/{}".format, st.integers(0, 70000), TEXT),
    TEXT,
)  # fmt: skip
PATH_LINE = st.builds(
    lambda path, weight: f"{path} {weight}".rstrip(),
    st.one_of(st.just("/"), st.builds("/{}".format, TEXT), TEXT),
    st.one_of(st.just(""), NUMBER_TEXT),
)
HEADER_LINE = st.builds(
    "{}:{}".format,
    st.one_of(st.sampled_from(["X-A", "Host", "Authorization", "Accept", "bad name"]), TEXT),
    st.one_of(TEXT, st.sampled_from([" v", " \x00", " é", " " + "a" * 9000])),
)
STATUS = st.lists(
    st.one_of(
        st.sampled_from(["200", "2xx", "404", "6xx", "099", "5XX"]), st.integers(0, 1000).map(str), TEXT
    ),
    max_size=5,
).map(", ".join)


def lines(strategy) -> st.SearchStrategy[str]:
    return st.lists(strategy, max_size=6).map("\n".join)


def choices(values) -> st.SearchStrategy[list[str]]:
    return st.lists(st.one_of(st.sampled_from(values), TEXT), max_size=4)


ARM_NAMES = list(protocol.ARMS)
FIELDS = {
    "target_name": TEXT,
    "plain_url": URLS,
    "tls_url": URLS,
    "arms": choices(ARM_NAMES),
    "users": NUMBER_TEXT,
    "spawn_rate": NUMBER_TEXT,
    "warmup_s": NUMBER_TEXT,
    "duration_s": NUMBER_TEXT,
    "paths": lines(PATH_LINE),
    "headers": lines(HEADER_LINE),
    "auth_type": st.one_of(st.sampled_from(["none", "basic", "bearer"]), TEXT),
    "auth_user": st.one_of(st.just("user"), st.just("a:b"), TEXT),
    "auth_secret": st.one_of(st.just("s3cret"), st.just("tok en"), TEXT),
    "send_credentials_over_http": st.sampled_from(["on", ""]),
    "expected_status": STATUS,
    "think_time_s": NUMBER_TEXT,
    "arrival_rate": NUMBER_TEXT,
    "rounds": NUMBER_TEXT,
    "follow_redirects": st.sampled_from(["on", ""]),
    "probe_server": st.sampled_from(["on", ""]),
    "openssl_speed": st.sampled_from(["on", ""]),
    "cryptsetup": st.sampled_from(["on", ""]),
    "local_process": st.one_of(st.sampled_from(["tollgate-demo", "a" * 16, "x y", "-"]), TEXT),
    "verify_tls": st.sampled_from(["on", ""]),
    "save_as": TEXT,
    "tls_matrix": choices(["protocol", "group", "cert", "resumption"]),
    "wan_rtt_ms": st.one_of(st.lists(NUMBER_TEXT, max_size=10).map(",".join), TEXT),
    "generators": st.one_of(st.sampled_from(["1", "auto", "0", "65", "AUTO"]), NUMBER_TEXT),
    "saturation_arms": choices(ARM_NAMES),
    "saturation_mode": st.one_of(st.sampled_from(["users", "rate"]), TEXT),
    "saturation_start": NUMBER_TEXT,
    "saturation_max": NUMBER_TEXT,
    "saturation_stage_s": NUMBER_TEXT,
}
VALID = VALID_FORM


@st.composite
def form_data(draw) -> dict:
    """The valid form with a few fields changed, dropped or added at random."""
    data = dict(VALID)
    for name in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=6, unique=True)):
        if name in data and draw(st.integers(0, 4)) == 0:
            del data[name]
        else:
            data[name] = draw(FIELDS[name])
    return data


def _validation_message(parse, text):
    try:
        return parse(text)
    except forms.ValidationError as exc:
        assert exc.messages and all(isinstance(m, str) and m.strip() for m in exc.messages), exc
    except ValueError as exc:
        assert str(exc).strip(), exc
    return None


@given(paths=lines(PATH_LINE), headers=lines(HEADER_LINE), status=STATUS, rtts=FIELDS["wan_rtt_ms"],
       generators=FIELDS["generators"])  # fmt: skip
@example(paths="/a nan", headers="X-A: \x00", status="2xx, 6xx", rtts="nan", generators="1e3")
@fuzz("run_form.inputs")
def test_the_text_fields_parse_to_their_shape_or_say_what_is_wrong(paths, headers, status, rtts, generators):
    count("run_form.inputs")
    parsed = _validation_message(fields.parse_paths, paths)
    if parsed is not None:
        assert len(parsed) <= fields.MAX_PATHS
        assert all(p["path"].startswith("/") and 0 < p["weight"] <= 1000 for p in parsed)
    parsed = _validation_message(fields.parse_headers, headers)
    if parsed is not None:
        for name, value in parsed.items():
            assert fields.HEADER_NAME.match(name) and name.lower() not in fields.RESERVED_HEADERS
            assert re.fullmatch(r"[\t\x20-\x7e]*", value) and len(value) <= fields.MAX_HEADER_VALUE_BYTES
    parsed = _validation_message(fields.parse_status, status)
    if parsed is not None:
        assert parsed == sorted(set(parsed)) and all(100 <= code <= 599 for code in parsed)
    parsed = _validation_message(wan.parse_rtts, rtts)
    if parsed is not None:
        assert parsed and all(math.isfinite(r) and 0 <= r <= wan.MAX_RTT_MS for r in parsed)
    parsed = _validation_message(protocol.parse_generators, generators)
    if parsed is not None:
        assert 0 <= parsed <= protocol.MAX_GENERATORS


@pytest.fixture
def member_browser(django_user_model, owner):
    """A member (not owner) of a team project, which is their current project, logged in; the
    project's run counts unlimited (they are the quota's business), a saved scenario with headers."""
    member = django_user_model.objects.create_user("member", password="member-pass-123")
    project = Project.objects.create(name="team")
    Membership.objects.create(project=project, user=owner, role=Role.OWNER)
    Membership.objects.create(project=project, user=member, role=Role.MEMBER)
    ProjectQuota.objects.create(project=project, max_concurrent_runs=10**6, max_runs_per_day=10**6)
    scenario = starting.save_scenario(
        project,
        "with headers",
        {**VALID, "arms": ["tls"], "users": 2, "duration_s": 3, "headers": {"X-A": "1"}},
    )
    client = Client(raise_request_exception=False)
    client.force_login(member)
    session = client.session
    session[SESSION_KEY] = str(project.code)
    session.save()
    return client, project, str(scenario.code)


def _check_answer(response, runs_before: int, project) -> None:
    runs_now = Run.objects.filter(project=project).count()
    assert response.status_code in (200, 302, 400), response.content[:500]
    if response.status_code == 302:
        assert re.fullmatch(r"/runs/[0-9a-f-]{36}/", response["Location"]), response["Location"]
        assert runs_now == runs_before + 1
        return
    assert runs_now == runs_before  # a refused form starts nothing
    page = response.content.decode()
    if response.status_code == 400:
        assert page.strip(), "a 400 without a word"
        return
    form = response.context["form"]
    assert isinstance(form, RunForm) and form.errors, "the form came back without an error"
    for field, messages in form.errors.items():
        for message in messages:
            assert message.strip(), field
            assert escape(message) in page, f"{field}: {message!r} is not on the page"


@pytest.mark.django_db
def test_the_run_form_answers_a_member_without_a_server_error(member_browser):
    client, project, scenario = member_browser

    @given(
        data=form_data(),
        base=st.one_of(st.none(), st.just(scenario), TEXT),
        raw=mostly(st.none(), st.binary(max_size=200), one_in=8),
    )
    @example(data=VALID, base=None, raw=None)  # the valid form starts a run: the property is not vacuous
    @example(data={**VALID, "arms": ["tls"]}, base=scenario, raw=None)
    # Were 500s: the page's "too short for intervals" note took int() / floor() of "nan" and "1e309".
    @example(data={**VALID, "duration_s": "1e309", "paths": "/a 1\n/b nan"}, base=None, raw=None)
    @example(data={**VALID, "rounds": "nan"}, base=None, raw=None)
    @example(data={**VALID, "rounds": "-inf", "duration_s": "nan"}, base=None, raw=None)
    @fuzz("run_form.post")
    def post(data, base, raw):
        count("run_form.post")
        before = Run.objects.filter(project=project).count()
        if raw is not None:  # a body no browser would send
            response = client.post("/runs/new/", data=raw, content_type="application/x-www-form-urlencoded")
        else:
            response = client.post("/runs/new/", {**data, **({"scenario": base} if base is not None else {})})
        _check_answer(response, before, project)

    post()
