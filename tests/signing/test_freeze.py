"""Freezing a run's report: signed once with the active key, the export is the frozen report, keys
are made at first use, rotate, stay published, and the private key is stored sealed."""

from __future__ import annotations

import base64
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from portal import vault
from portal.audit.models import AuditEvent
from portal.lib.security import signing
from portal.runs import reporting
from portal.runs.models import Run
from portal.signing import services
from portal.signing.models import FrozenReport, SigningKey
from tests.runs.factories import make_run, open_attempt
from tests.signing.helpers import get_at, number_paths, one_digit_changed, set_at
from workers import runner

pytestmark = pytest.mark.django_db


def test_a_frozen_report_is_the_export_and_verifies(owner):
    run = make_run(owner, seconds=3)
    assert SigningKey.objects.count() == 0
    frozen = services.freeze(run)
    key = SigningKey.objects.get()  # made at first use
    assert frozen.key_id == key.key_id and key.retired_at is None
    run = Run.objects.get(pk=run.pk)
    exported = reporting.export_report(run)
    assert exported == json.loads(frozen.body) == frozen.report()
    assert exported["integrity"]["sha256"] == frozen.sha256 == signing.digest(exported)
    assert exported["run"]["report_url"].startswith("http://127.0.0.1:8000/runs/")  # TOLLGATE_BASE_URL
    assert exported["arms"] == reporting.run_report(run)["arms"]
    assert signing.verify(exported, services.public_keys()) == []
    # The stored body is the canonical text itself.
    assert frozen.body == signing.dumps(exported)


def test_freezing_twice_never_signs_again(owner):
    run = make_run(owner)
    first = services.freeze(run)
    services.rotate_key()
    again = services.freeze(Run.objects.get(pk=run.pk))
    assert again.pk == first.pk and again.body == first.body and again.key_id == first.key_id
    assert FrozenReport.objects.count() == 1
    with pytest.raises(IntegrityError), transaction.atomic():
        FrozenReport.objects.create(run=run, body="{}", sha256="0", key_id="0", signed_at=timezone.now())


def test_a_running_run_is_not_frozen(owner):
    run = make_run(owner, status=Run.Status.RUNNING)
    with pytest.raises(services.FreezeError, match="only an ended run"):
        services.freeze(run)
    assert services.freeze_after_end(run) is None  # logged, never raised
    assert reporting.export_report(Run.objects.get(pk=run.pk)).get("integrity") is None


def test_every_number_of_a_real_report_is_covered(owner):
    run = make_run(owner, seconds=3, server_cpu_ms={"plain": 0.2, "tls": 0.3, "tls_new": 0.9})
    report = services.freeze(run).report()
    keys = services.public_keys()
    paths = [p for p in number_paths(report) if p[0] != "integrity"]
    assert len(paths) > 200
    for path in paths[:: max(1, len(paths) // 150)]:
        original = get_at(report, path)
        set_at(report, path, one_digit_changed(original))
        problems = signing.verify(report, keys)
        assert problems and "the report's content changed: sha256" in problems[0], path
        set_at(report, path, original)
    assert signing.verify(report, keys) == []


def test_rotation_keeps_old_reports_verifiable_and_signs_new_ones_with_the_new_key(owner):
    old_run, new_run = make_run(owner, target_name="a"), make_run(owner, target_name="b")
    old_report = services.freeze(old_run).report()
    old_key = SigningKey.objects.get()
    new_key, retired = services.rotate_key()
    assert retired.pk == old_key.pk and new_key.key_id != old_key.key_id
    audited = AuditEvent.objects.filter(kind=AuditEvent.Kind.CREDENTIAL_SAVED, detail__key_id=new_key.key_id)
    assert audited.get().detail == {
        "credential": "report-signing key",
        "key_id": new_key.key_id,
        "retired": old_key.key_id,
    }
    new_report = services.freeze(new_run).report()
    assert new_report["integrity"]["key_id"] == new_key.key_id
    assert old_report["integrity"]["key_id"] == old_key.key_id
    published = services.published()
    assert [k["key_id"] for k in published] == [old_key.key_id, new_key.key_id]
    assert published[0]["retired"] is not None and published[1]["retired"] is None
    keys = services.public_keys()
    assert signing.verify(old_report, keys) == [] and signing.verify(new_report, keys) == []
    # Without the old key published, the old report names it.
    only_new = {new_key.key_id: keys[new_key.key_id]}
    assert signing.verify(old_report, only_new) == [
        f"unknown key id {old_key.key_id} (published keys: {new_key.key_id})"
    ]


def test_only_one_key_is_ever_active(owner):
    key = services.active_key()
    assert services.active_key().pk == key.pk
    with pytest.raises(IntegrityError), transaction.atomic():
        SigningKey.objects.create(key_id="f" * 16, public_key="x", private_key_enc="x")
    assert SigningKey.objects.filter(retired_at__isnull=True).count() == 1


def test_the_private_key_is_stored_sealed(owner):
    run = make_run(owner)
    report = services.freeze(run).report()
    key = SigningKey.objects.get()
    private = services.private_key(key)
    raw = private.private_bytes_raw()
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM signing_signingkey")
        row_text = " ".join(str(value) for value in cursor.fetchone())
    for form in (base64.b64encode(raw).decode(), raw.hex(), base64.urlsafe_b64encode(raw).decode()):
        assert form not in row_text
    assert key.private_key_enc.startswith("gAAAAA")  # a Fernet token
    assert vault.unseal(key.private_key_enc)["ed25519"] == base64.b64encode(raw).decode()
    assert signing.key_id(private.public_key()) == key.key_id == report["integrity"]["key_id"]
    assert base64.b64encode(raw).decode() not in json.dumps(services.published())


def test_rotate_secrets_reseals_the_signing_keys(owner, settings):
    old, new = vault.generate_key(), vault.generate_key()
    settings.TOLLGATE_SECRET_KEYS = [old]
    key = services.active_key()
    raw = services.private_key(key).private_bytes_raw()
    settings.TOLLGATE_SECRET_KEYS = [new, old]
    out = io.StringIO()
    call_command("tollgate", "rotate-secrets", stdout=out)
    assert "1 report-signing key(s)" in out.getvalue()
    settings.TOLLGATE_SECRET_KEYS = [new]
    key.refresh_from_db()
    assert services.private_key(key).private_bytes_raw() == raw


def test_the_reaper_freezes_the_runs_it_ends(owner, settings):
    """A run lost as often as allowed is ended by the reaper (earlier losses resume it instead)."""
    run = make_run(owner, status=Run.Status.RUNNING)
    silent_since = timezone.now() - timezone.timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(finished=None)
    open_attempt(run, settings.TOLLGATE_MAX_RUN_ATTEMPTS, heartbeat=silent_since)
    assert runner.reap_stale_runs() == 1
    run = Run.objects.get(pk=run.pk)
    assert run.status == Run.Status.FAILED
    report = reporting.export_report(run)
    assert report["run"]["status"] == "failed" and "lost (no heartbeat for 30 s)" in report["run"]["error"]
    assert signing.verify(report, services.public_keys()) == []


def test_the_runner_finish_freezes_and_survives_a_failing_freeze(owner, monkeypatch):
    run = make_run(owner, status=Run.Status.RUNNING)
    assert runner.finish(run, Run.Status.SUCCEEDED)
    assert FrozenReport.objects.filter(run=run).exists()
    other = make_run(owner, status=Run.Status.RUNNING, target_name="other")

    def broken(run):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "run_report", broken)
    assert runner.finish(other, Run.Status.SUCCEEDED)  # the run's finish stands
    assert Run.objects.get(pk=other.pk).status == Run.Status.SUCCEEDED
    assert not FrozenReport.objects.filter(run=other).exists()


def test_rotate_secrets_names_a_signing_key_it_cannot_read(owner, settings):
    settings.TOLLGATE_SECRET_KEYS = [vault.generate_key()]
    key = services.active_key()
    settings.TOLLGATE_SECRET_KEYS = [vault.generate_key()]  # the old key lost
    with pytest.raises(CommandError, match=f"report-signing key {key.key_id}: .*nothing was changed"):
        call_command("tollgate", "rotate-secrets", stdout=io.StringIO())
    assert SigningKey.objects.get().private_key_enc == key.private_key_enc


def test_a_run_cancelled_before_it_started_is_frozen_when_its_task_arrives(client, owner):
    run = make_run(owner, status=Run.Status.QUEUED, arms={})
    Run.objects.filter(pk=run.pk).update(started=None)  # as a queued run is
    client.force_login(owner)
    client.post(reverse("runs-cancel", args=[run.code]), {"confirm": "yes"})
    assert not FrozenReport.objects.filter(run=run).exists()
    assert runner.execute_run(run.pk) is None  # the queued task: not ours to run any more
    exported = reporting.export_report(Run.objects.get(pk=run.pk))
    assert exported["run"]["status"] == "cancelled"
    assert signing.verify(exported, services.public_keys()) == []
    runner.execute_run(run.pk)  # a redelivery signs nothing again
    assert FrozenReport.objects.filter(run=run).count() == 1


def test_the_signed_report_names_the_scenario_version_it_ran(owner, client):
    """An auditor reads which saved recipe (and which version of it) a report measured, under the
    signature; an ad hoc run says null."""
    from portal.scenarios.models import Scenario

    run = make_run(owner)
    scenario = Scenario.objects.create(project=run.project, target=run.target, name="nightly", version=4)
    Run.objects.filter(pk=run.pk).update(scenario=scenario, scenario_version=3)
    adhoc = make_run(owner, target_name="other")
    frozen = services.freeze(Run.objects.get(pk=run.pk)).report()
    assert frozen["run"]["scenario"] == {"id": str(scenario.code), "name": "nightly", "version": 3}
    assert signing.verify(frozen, services.public_keys()) == []
    assert services.freeze(adhoc).report()["run"]["scenario"] is None
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert "nightly version 3" in page
