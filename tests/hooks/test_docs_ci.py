"""The shell step of docs/ci.md against a stand-in portal (a real local HTTP server): the signature
openssl makes verifies, and every verdict maps to its exit code (a failed budget 3 included) without
waiting for real runs. The live path, a real run whose budget fails, is tests/hooks/test_end_to_end.py's."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from portal.lib.report import budgets
from portal.lib.security import hooks as webhooks
from tests.hooks.test_end_to_end import run_shell_step

SECRET = "whsec_docs-test"
FAILED_BUDGET = {
    "status": "fail",
    "results": [
        {
            "name": "keepalive_tls_p95_ms",
            "limit": 5,
            "value": 9.5,
            "unit": "ms",
            "status": "fail",
            "detail": "",
        },
        {"name": "handshake_ms", "limit": 10, "value": 2, "unit": "ms", "status": "pass", "detail": ""},
    ],
}


def test_the_stand_in_verdict_names_real_budgets():
    assert {item["name"] for item in FAILED_BUDGET["results"]} <= set(budgets.NAMES)


class FakePortal:
    """Answers the webhook (checking the signature for real) and then the status JSON: queued once,
    then ``final``."""

    def __init__(self, final: dict) -> None:
        self.final, self.polls, self.verdicts, self.bodies = final, 0, [], []
        portal = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                verdict = webhooks.verify_tollgate([SECRET], dict(self.headers), body, time.time())
                portal.verdicts.append(verdict)
                portal.bodies.append(json.loads(body))
                if not verdict.ok:
                    return self.reply(401, {"status": 401, "errors": {}, "detail": verdict.reason})
                base = f"http://127.0.0.1:{self.server.server_address[1]}"
                links = {"run_url": "", "report_url": "", "share_url": base + "/s/t/"}
                return self.reply(202, {"run_id": "r-1", "status_url": base + "/s/t/status.json", **links})

            def do_GET(self) -> None:  # noqa: N802
                portal.polls += 1
                self.reply(200, {"status": "queued"} if portal.polls == 1 else portal.final)

            def reply(self, status: int, data: dict) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format, *args):  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/abc"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("final", "code", "says"),
    [
        (
            {"status": "succeeded", "headline": "TLS adds 1.2 ms", "budgets": {"status": "pass"}},
            0,
            "TLS adds 1.2 ms",
        ),
        ({"status": "succeeded", "headline": "TLS adds 1 ms", "budgets": None}, 0, "budgets: none"),
        (
            {"status": "succeeded", "headline": "TLS adds 9 ms", "budgets": FAILED_BUDGET},
            3,
            "keepalive_tls_p95_ms",
        ),
        ({"status": "failed", "error": "target down", "headline": None}, 1, "target down"),
        ({"status": "cancelled", "error": "", "headline": None}, 1, "the run cancelled"),
        (
            {
                "status": "incomplete",
                "status_line": "incomplete: no cost could be computed — plain arm refused: port 8443",
                "error": "No cost could be computed — plain arm refused: port 8443 speaks TLS",
                "headline": None,
            },
            4,
            "the run incomplete: no cost could be computed — plain arm refused",
        ),
    ],
)
def test_every_verdict_has_its_exit_code(tmp_path, final, code, says):
    portal = FakePortal(final)
    try:
        overrides = '{"users": 3, "duration_s": 5}'
        done = run_shell_step(
            tmp_path,
            portal.url,
            SECRET,
            TOLLGATE_OVERRIDES=overrides,
            TOLLGATE_POLL_S="0.1",
            GITHUB_RUN_ID="77",
        )
    finally:
        portal.close()
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
    [verdict] = portal.verdicts
    assert verdict.ok, verdict.reason  # what openssl signed verifies byte for byte
    assert portal.bodies == [
        {"idempotency_key": portal.bodies[0]["idempotency_key"], "overrides": json.loads(overrides)}
    ]
    assert portal.bodies[0]["idempotency_key"].startswith("77-")
    assert portal.polls == 2  # it waited through "queued"
    if code == 3:
        assert "budget keepalive_tls_p95_ms failed: 9.5 ms (limit 5)" in done.stderr
        assert "handshake_ms" not in done.stderr
