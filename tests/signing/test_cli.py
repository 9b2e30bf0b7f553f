"""``tollgate verify-report FILE [--keys URL|FILE]`` and ``tollgate report-keys list|rotate``: exit 0
for an intact report, 1 naming what fails."""

from __future__ import annotations

import http.server
import io
import json
import socket
import threading

import pytest
from django.core.management import call_command

from portal.signing import services
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def verify(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("tollgate", "verify-report", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def report_file(owner, tmp_path):
    report = services.freeze(make_run(owner)).report()
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report, indent=2))
    return path


@pytest.fixture
def keys_server():
    """A local HTTP server on 127.0.0.1 serving ``documents`` (path → bytes) and 404 for the rest."""
    documents: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            body = documents.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body or b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", documents
    server.shutdown()
    server.server_close()


def test_an_intact_report_verifies_with_the_portals_own_keys(report_file):
    code, out, err = verify(str(report_file))
    report = json.loads(report_file.read_text())
    assert code == 0, err
    assert out.strip() == (
        f"intact: sha256 {report['integrity']['sha256']}, signed by key {report['integrity']['key_id']} "
        f"at {report['integrity']['signed_at']}"
    )


def test_a_changed_number_exits_1_naming_the_digest(report_file):
    text = report_file.read_text()
    report = json.loads(text)
    requests = report["arms"]["tls"]["requests"]
    report["arms"]["tls"]["requests"] = requests + 1
    report_file.write_text(json.dumps(report, indent=2))
    code, out, err = verify(str(report_file))
    assert code == 1 and out == ""
    assert "FAILED: the report's content changed: sha256 " in err
    assert report["integrity"]["sha256"] in err


def test_keys_from_a_file_and_from_a_url(report_file, tmp_path, keys_server):
    document = json.dumps({"keys": services.published()}).encode()
    keys_file = tmp_path / "keys.json"
    keys_file.write_bytes(document)
    assert verify(str(report_file), "--keys", str(keys_file))[0] == 0
    base, documents = keys_server
    documents["/.well-known/tollgate-report-keys.json"] = document
    assert verify(str(report_file), "--keys", f"{base}/.well-known/tollgate-report-keys.json")[0] == 0
    # Another portal's keys: the report's key is unknown there.
    services.rotate_key()
    others = [k for k in services.published() if k["retired"] is None]
    documents["/other.json"] = json.dumps({"keys": others}).encode()
    code, _, err = verify(str(report_file), "--keys", f"{base}/other.json")
    key_id = json.loads(report_file.read_text())["integrity"]["key_id"]
    assert code == 1 and f"FAILED: unknown key id {key_id} (published keys: {others[0]['key_id']})" in err


def test_unreadable_inputs_exit_1_saying_why(report_file, tmp_path, keys_server):
    base, _ = keys_server
    cases = {
        (str(tmp_path / "missing.json"),): "missing.json: No such file or directory",
        (str(tmp_path),): "Is a directory",
        (str(report_file), "--keys", f"{base}/gone.json"): "gone.json: HTTP 404",
        (str(report_file), "--keys", str(tmp_path / "nokeys.json")): "nokeys.json: No such file",
        (str(report_file), "--keys", "ftp://127.0.0.1/keys.json"): "only http and https",
    }
    (tmp_path / "broken.json").write_text('{"arms": ')
    cases[(str(tmp_path / "broken.json"),)] = "broken.json: not JSON"
    (tmp_path / "list.json").write_text("[1, 2]")
    cases[(str(tmp_path / "list.json"),)] = "not a report"
    (tmp_path / "unsigned.json").write_text('{"arms": {}}')
    cases[(str(tmp_path / "unsigned.json"),)] = "FAILED: the report carries no integrity block"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    cases[(str(report_file), "--keys", f"http://127.0.0.1:{closed}/k.json")] = "cannot fetch the keys"
    for args, said in cases.items():
        code, out, err = verify(*args)
        assert code == 1 and said in err and out == "", (args, err)


def test_report_keys_list_and_rotate(owner):
    out = io.StringIO()
    call_command("tollgate", "report-keys", "rotate", stdout=out)
    first = services.active_key()
    assert out.getvalue().strip() == f"new report-signing key {first.key_id}"
    out = io.StringIO()
    call_command("tollgate", "report-keys", "rotate", stdout=out)
    second = services.active_key()
    assert f"new report-signing key {second.key_id}; {first.key_id} is retired" in out.getvalue()
    out = io.StringIO()
    call_command("tollgate", "report-keys", "list", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert lines[0].startswith(first.key_id) and "retired" in lines[0]
    assert lines[1].startswith(second.key_id) and lines[1].endswith("active")
    out = io.StringIO()
    call_command("tollgate", "report-keys", "list", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"keys": services.published()}
