"""A real run (the engine against local servers, through workers.runner as `tollgate run` does) is
frozen when it finishes; the JSON the CLI prints and the JSON its page downloads are that frozen
report, and they verify through `tollgate verify-report`; a tampered download does not."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.urls import reverse

from portal.lib.security import signing
from portal.runs.models import Run
from portal.signing.models import FrozenReport

# Transactional: the executor's heartbeat thread writes the run row through its own connection.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("admin", "admin@example.com", "admin-pass-123")


def verify(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    try:
        call_command("tollgate", "verify-report", *args, stdout=io.StringIO(), stderr=err)
    except SystemExit as exc:
        return exc.code, err.getvalue()
    return 0, err.getvalue()


def test_a_finished_run_is_frozen_and_its_download_verifies(
    admin, client, plain_server, tls_server, tmp_path
):
    out = io.StringIO()
    call_command(
        "tollgate",
        "run",
        *("--plain-url", plain_server.url(), "--tls-url", tls_server.url(), "--arms", "plain,tls"),
        *("--users", "2", "--spawn-rate", "10", "--warmup", "0.2", "--duration", "1", "--insecure", "--json"),
        stdout=out,
        stderr=io.StringIO(),
    )
    run = Run.objects.get()
    assert run.status == Run.Status.SUCCEEDED
    frozen = FrozenReport.objects.get(run=run)
    printed = json.loads(out.getvalue())
    assert printed == frozen.report() and printed["integrity"]["sha256"] == frozen.sha256
    assert printed["arms"]["tls"]["requests"] > 0 and printed["run"]["status"] == "succeeded"

    client.force_login(admin)
    response = client.get(reverse("runs-report-json", args=[run.code]) + "?download=1")
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    downloaded = tmp_path / f"tollgate-run-{run.code}.json"
    downloaded.write_bytes(response.content)
    assert json.loads(response.content) == printed
    assert verify(str(downloaded)) == (0, "")

    # The run page shows the digest, the key and where the keys are published.
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert f'<code class="digest" id="integrity-sha256">{frozen.sha256}</code>' in page
    assert f'<code id="integrity-key">{frozen.key_id}</code>' in page
    assert 'href="/.well-known/tollgate-report-keys.json"' in page

    # One digit of one number changed in the downloaded file.
    tampered = json.loads(response.content)
    p50 = tampered["arms"]["tls"]["ttlb_us"]["p50"]
    tampered["arms"]["tls"]["ttlb_us"]["p50"] = p50 + (1 if p50 % 10 != 9 else -1)
    downloaded.write_text(json.dumps(tampered, indent=2))
    code, err = verify(str(downloaded))
    assert code == 1 and f"the report's content changed: sha256 {signing.digest(tampered)}" in err
