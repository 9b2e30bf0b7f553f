"""Bad input, tried as a new user would: never a 500 or a traceback, always a field error (form) or a
one-line message and exit 1 (CLI), and nothing half-created left behind."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from urllib.parse import urlencode

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from portal.lib.security.sshkeys import generate_key
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from portal.targets.models import SshAccess, Target
from tests.conftest import ROOT, database_url_for_children
from tests.runs.factories import VALID_FORM, make_run

FORM = VALID_FORM
SSH = {"host": "10.0.0.5", "port": "22", "username": "probe", "key_source": "generate"}
MEGABYTE = "a" * 1_000_000


def stored() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (Target, Run, Scenario, SshAccess))


@pytest.fixture
def browser(owner):
    """A logged-in browser: CSRF checked as in production, server errors answered, not raised."""
    client = Client(enforce_csrf_checks=True, raise_request_exception=False)
    client.force_login(owner)
    client.get("/runs/new/")  # sets the CSRF cookie
    return client


# (method, path, form fields or a raw latin-1 body, expected status, text the page must show)
WEB_CASES = {
    "scenario-not-a-uuid-get": ("get", "/runs/new/?scenario=not-a-uuid", None, 404, ""),
    "scenario-not-a-uuid-post": (
        "post", "/runs/new/", {**FORM, "scenario": "not-a-uuid"}, 200, "The saved scenario was not found"
    ),
    "scenario-unknown-post": (
        "post", "/runs/new/", {**FORM, "scenario": "2b1e0c9e-97a4-4c1e-9d1c-3a4c1f8e0a11"}, 200,
        "The saved scenario was not found",
    ),
    "since-impossible-date": ("get", "/runs/?since=2024-13-45", None, 200, "is not a date"),
    "until-impossible-date": ("get", "/runs/?until=2024-02-30", None, 200, "is not a date"),
    "target-ipv6-unterminated": (
        "post", "/targets/", {"name": "x", "plain_url": "http://[::1/"}, 200, "The URL is malformed"
    ),
    "run-ipv6-unterminated": (
        "post", "/runs/new/", {**FORM, "plain_url": "http://[::1/"}, 200, "Enter a valid URL"
    ),
    "run-form-latin-1": ("post", "/runs/new/", "latin-1", 400, "charset=latin-1"),
    "target-form-latin-1": ("post", "/targets/", "latin-1", 400, "charset=latin-1"),
    "header-not-latin-1": (
        "post", "/runs/new/", {**FORM, "arms": ["tls"], "headers": "X-Client: \u20ac 5"}, 200,
        "non-ASCII character (\u20ac)",
    ),
    "header-latin-1-but-not-ascii": (
        "post", "/runs/new/", {**FORM, "arms": ["tls"], "headers": "X-Name: J\u00fcrgen"}, 200, "non-ASCII"
    ),
    "header-megabyte": (
        "post", "/runs/new/", {**FORM, "arms": ["tls"], "headers": f"X-Big: {MEGABYTE}"}, 200,
        "at most 32768 characters",
    ),
    "header-value-over-8k": (
        "post", "/runs/new/", {**FORM, "arms": ["tls"], "headers": f"X-Big: {'b' * 9000}"}, 200,
        "at most 8192",
    ),
    "path-not-ascii": ("post", "/runs/new/", {**FORM, "paths": "/caf\u00e9"}, 200, "percent-encode"),
    "url-not-ascii": (
        "post", "/runs/new/", {**FORM, "tls_url": "https://127.0.0.1:8443/caf\u00e9"}, 200, "percent-encode"
    ),
    "local-process-dash-x": (
        "post", "/runs/new/", {**FORM, "local_process": "-x"}, 200, "not starting with -"
    ),
    "server-process-dash-x": (
        "post", "/targets/{target}/ssh/", {**SSH, "server_process": "-x"}, 200, "not starting with -"
    ),
    "ssh-host-option-like": (
        "post", "/targets/{target}/ssh/", {**SSH, "host": "-oProxyCommand=x", "server_process": "nginx"},
        200, "not starting with -",
    ),
}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(WEB_CASES), ids=list(WEB_CASES))
def test_bad_web_input_gets_an_error_not_a_500(browser, owner, case):
    method, path, fields, status, text = WEB_CASES[case]
    path = path.format(target=make_run(owner).target.code)
    before = stored()
    token = {"csrfmiddlewaretoken": browser.cookies["csrftoken"].value}
    if method == "get":
        response = browser.get(path)
    elif fields == "latin-1":  # a client that declares its form Latin-1 (Django reads only UTF-8)
        fields = {**token, **FORM, "name": "caf\u00e9", "target_name": "caf\u00e9"}
        body = urlencode(fields, doseq=True, encoding="latin-1")
        response = browser.post(path, body, content_type="application/x-www-form-urlencoded; charset=latin-1")
    else:
        response = browser.post(path, {**token, **fields})
    body = response.content.decode()
    assert response.status_code == status, body[:3000]
    assert text in body, body[:3000]
    assert "Traceback" not in body
    assert stored() == before  # nothing half-created


def _cli(*args: str) -> None:
    call_command(
        "tollgate", "run", "--plain-url", "http://127.0.0.1:9/", "--arms", "plain", "--warmup", "0",
        "--duration", "1", *args, stdout=io.StringIO(), stderr=io.StringIO(),
    )  # fmt: skip


@pytest.fixture
def ssh_key(tmp_path) -> str:
    path = tmp_path / "key"
    path.write_text(generate_key()[0])
    return str(path)


CLI_CASES = {
    "path-not-utf-8": (["--path", "/\udcff"], "--path: Line 1: the path has a control or non-ASCII"),
    "path-not-ascii": (["--path", "/caf\u00e9"], "percent-encode"),
    "url-not-utf-8": (["--plain-url", "http://127.0.0.1:9/\udcff"], "--plain-url: The URL has a space"),
    "name-not-utf-8": (["--name", "caf\udce9"], "--name: Not valid UTF-8"),
    "owner-not-utf-8": (["--owner", "\udcff"], "no user named '\\udcff'"),
    "header-not-latin-1": (["--header", "X-Client: \u20ac"], "--header: Line 1: the value of X-Client"),
    "header-megabyte": (["--header", f"X-Big: {MEGABYTE}"], "--header: Ensure this value has at most 32768"),
    "local-process-dash-x": (["--local-process=-x"], "--local-process: A process name"),
    "local-process-shell": (["--local-process", "a;reboot"], "--local-process: A process name"),
    # SSH: valid --ssh-* options (host, user, key file) first; the case's own options override them.
    "server-process-dash-x": (["SSH", "--server-process=-x"], "--server-process: A process name"),
    "server-process-too-long": (["SSH", "--server-process", "a" * 16], "--server-process: A process name"),
    "server-process-without-ssh": (["--server-process", "nginx"], "--server-process needs --ssh-host"),
    "ssh-host-option-like": (["SSH", "--ssh-host=-oProxyCommand=x"], "--ssh-host: A host name"),
    "ssh-user-with-space": (["SSH", "--ssh-user", "a b"], "--ssh-user: A user name"),
    "ssh-port-out-of-range": (["SSH", "--ssh-port", "70000"], "--ssh-port: Ensure this value is less"),
    "credentials-over-http-unticked": (
        ["--header", "X-Key: k"],
        "--send-credentials-over-http: The arm(s) plain",
    ),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CLI_CASES), ids=list(CLI_CASES))
def test_bad_cli_options_give_one_line_and_store_nothing(admin_user, ssh_key, case):
    args, message = CLI_CASES[case]
    ssh = ["--ssh-host", "127.0.0.1", "--ssh-user", "probe", "--ssh-key", ssh_key]
    args = [item for arg in args for item in (ssh if arg == "SSH" else [arg])]
    with pytest.raises(CommandError) as raised:
        _cli(*args)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert stored() == (0, 0, 0, 0)


@pytest.mark.django_db(transaction=True)
def test_cli_path_not_utf_8_exits_1_with_one_line_in_a_real_shell(admin_user):
    """`--path $'/\\xff'` from a shell: a one-line message and exit 1, no DataError traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": database_url_for_children()}
    proc = subprocess.run(
        [sys.executable, "manage.py", "tollgate", "run", "--plain-url", "http://127.0.0.1:9/", "--arms",
         "plain", "--path", b"/\xff"],
        capture_output=True, cwd=ROOT, env=env, timeout=120, check=False,
    )  # fmt: skip
    stderr = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "DataError" not in stderr
    assert stderr.strip().count("\n") == 0 and "--path: Line 1" in stderr
    assert stored() == (0, 0, 0, 0)
