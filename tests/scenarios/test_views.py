"""The scenario pages: list, page, edit (a new version each save; secrets never rendered back)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal import vault
from portal.audit.models import AuditEvent
from portal.projects.models import Membership, Role, personal_project
from portal.runs import starting
from portal.runs.configs import engine_dict
from portal.runs.models import Run
from portal.scenarios.models import Scenario
from tests.runs.factories import make_run
from tests.scenarios.conftest import SECRET_HEADER, SECRET_TOKEN

pytestmark = pytest.mark.django_db


def edit_data(scenario: Scenario, **changes) -> dict:
    """What a browser posts from the edit page as pre-filled (secret fields blank, as rendered)."""
    config = scenario.config
    data = {
        "name": scenario.name,
        "target_name": config.get("target_name") or "",
        "plain_url": config["plain_url"],
        "tls_url": config["tls_url"],
        "arms": config["arms"],
        "users": config["users"],
        "spawn_rate": config["spawn_rate"],
        "warmup_s": config["warmup_s"],
        "duration_s": config["duration_s"],
        "rounds": config.get("rounds") or 1,
        "arrival_rate": config.get("arrival_rate") or "",
        "auth_type": config.get("auth_type") or "none",
        "auth_user": "",
        "auth_secret": "",
        "headers": "",
        "follow_redirects": "on",
        "callback_url": scenario.callback_url,
    }
    data.update({f"budget_{name}": limit for name, limit in scenario.budgets.items()})
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_edit_page_shows_the_scenario_but_never_its_secrets(client, owner, scenario):
    client.force_login(owner)
    page = client.get(reverse("scenarios-edit", args=[scenario.code])).content.decode()
    assert 'value="ci smoke"' in page and 'value="https://127.0.0.1:9/1k"' in page
    assert 'name="budget_keepalive_tls_p50_ms"' in page and 'value="2' in page
    assert "header-secret-4711" not in page and SECRET_TOKEN not in page and "X-Api-Key" not in page
    assert 'name="save_as"' not in page  # the name is the scenario's own field here
    assert "Save version 2" in page


def test_saving_bumps_the_version_keeps_the_secrets_and_is_audited(client, owner, scenario):
    client.force_login(owner)
    data = edit_data(
        scenario, users=3, budget_handshake_ms="2.5", budget_keepalive_tls_p50_ms="", name="ci nightly"
    )
    response = client.post(reverse("scenarios-edit", args=[scenario.code]), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert response["Location"] == reverse("scenarios-detail", args=[scenario.code])
    scenario.refresh_from_db()
    assert scenario.version == 2 and scenario.name == "ci nightly" and scenario.config["users"] == 3
    assert scenario.budgets == {"handshake_ms": 2.5, "failed_checks": 0}
    # Blank secret fields kept the sealed secrets (never in clear in the config).
    sealed = vault.unseal(scenario.config["secrets"])
    assert sealed["headers"] == {"X-Api-Key": "header-secret-4711"}
    assert sealed["auth"]["secret"] == SECRET_TOKEN
    assert SECRET_TOKEN not in str(scenario.config) and "header-secret-4711" not in str(scenario.config)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SCENARIO_CHANGED)
    assert event.actor == owner and event.project_id == scenario.project_id
    assert event.detail["version"] == 2 and event.detail["previous_version"] == 1
    assert event.detail["secrets_typed"] == []
    # Saved again: version 3.
    client.post(reverse("scenarios-edit", args=[scenario.code]), edit_data(scenario))
    scenario.refresh_from_db()
    assert scenario.version == 3


def test_field_errors_show_on_their_fields_and_nothing_is_saved(client, owner, scenario):
    client.force_login(owner)
    other = starting.save_scenario(
        scenario.project, "other", {"tls_url": "https://127.0.0.1:9/", "arms": ["tls"]}
    )
    data = edit_data(scenario, users=0, budget_handshake_ms="-1", budget_failed_checks="1.5", name=other.name)
    response = client.post(reverse("scenarios-edit", args=[scenario.code]), data)
    assert response.status_code == 200
    page = response.content.decode()
    for field in ("users", "budget_handshake_ms", "budget_failed_checks", "name"):
        block = page.split(f'id="field-{field}"', 1)[1].split('<div class="field', 1)[0]
        assert 'class="error"' in block, field
    assert "Another scenario of this project has this name." in page
    scenario.refresh_from_db()
    assert scenario.version == 1 and scenario.config["users"] == 2


def test_a_callback_outside_the_allowed_networks_is_refused(client, owner, scenario):
    client.force_login(owner)
    url = reverse("scenarios-edit", args=[scenario.code])
    for refused in ("http://10.1.2.3/hook", "http://169.254.169.254/latest", "ftp://127.0.0.1/x"):
        response = client.post(url, edit_data(scenario, callback_url=refused))
        assert response.status_code == 200, refused
        block = response.content.decode().split('id="field-callback_url"', 1)[1]
        assert 'class="error"' in block.split("</div>", 1)[0], refused
    scenario.refresh_from_db()
    assert scenario.version == 1 and scenario.callback_url == ""
    # Loopback is allowed here (TOLLGATE_ALLOW_NETWORKS of the tests).
    assert client.post(url, edit_data(scenario, callback_url="http://127.0.0.1:9/ci")).status_code == 302
    scenario.refresh_from_db()
    assert scenario.callback_url == "http://127.0.0.1:9/ci"


def test_viewer_reads_but_does_not_edit(client, owner, scenario, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="viewer-pass-123")
    Membership.objects.create(project=scenario.project, user=viewer, role=Role.VIEWER)
    client.force_login(viewer)
    assert client.get(reverse("scenarios-detail", args=[scenario.code])).status_code == 200
    assert (
        client.post(reverse("scenarios-edit", args=[scenario.code]), edit_data(scenario)).status_code == 403
    )
    scenario.refresh_from_db()
    assert scenario.version == 1


def test_a_run_from_a_scenario_records_its_version_and_budgets(client, owner, scenario, broker):
    project = personal_project(owner)
    first = starting.start_run(owner, project, {}, scenario=scenario)
    assert first.scenario_version == 1 and first.config["budgets"] == scenario.budgets
    assert "budgets" not in engine_dict(first.config)  # not the engine's
    starting.save_scenario(project, scenario.name, {"users": 3}, scenario=scenario)
    scenario.refresh_from_db()
    assert scenario.version == 2 and scenario.config["users"] == 3
    second = starting.start_run(owner, project, {"budgets": {"handshake_ms": 9}}, scenario=scenario)
    assert second.scenario_version == 2 and second.config["budgets"] == {"handshake_ms": 9.0}
    # From the run form too (blank secret fields keep the scenario's).
    client.force_login(owner)
    response = client.post(
        reverse("runs-new"),
        {
            **{k: v for k, v in edit_data(scenario).items() if not k.startswith("budget_")},
            "scenario": str(scenario.code),
        },
    )
    assert response.status_code == 302
    third = Run.objects.order_by("-pk").first()
    assert third.scenario_id == scenario.pk and third.scenario_version == 2
    assert third.config["budgets"] == scenario.budgets
    with pytest.raises(starting.RunRefused) as info:
        starting.start_run(owner, project, {"budgets": {"handshake": 1}}, scenario=scenario)
    assert "unknown budget 'handshake'" in info.value.errors["budgets"][0]


def test_list_and_page_show_versions_runs_and_budget_status(client, owner, scenario):
    run = make_run(owner, target_name="x")
    Run.objects.filter(pk=run.pk).update(
        scenario=scenario, scenario_version=1, summary={"budgets": {"status": "fail", "results": []}}
    )
    client.force_login(owner)
    listing = client.get(reverse("scenarios-list")).content.decode()
    assert "ci smoke" in listing and "keepalive_tls_p50_ms=2" in listing
    assert "budget-fail" in listing and f"?scenario={scenario.code}" in listing
    assert reverse("scenarios-edit", args=[scenario.code]) in listing
    page = client.get(reverse("scenarios-detail", args=[scenario.code])).content.decode()
    assert "Version 1" in page and str(run.code) in page and "budget-fail" in page
    assert SECRET_TOKEN not in page and SECRET_HEADER not in page


def test_run_page_shows_each_budget_with_its_verdict(client, owner):
    run = make_run(owner, target_name="b", seconds=8)  # per-second intervals: the costs are judged
    budgets = {"keepalive_tls_p50_ms": 0.01, "handshake_ms": 1, "failed_checks": 0}
    Run.objects.filter(pk=run.pk).update(config={**run.config, "budgets": budgets})
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    table = page.split('id="budget-table"', 1)[1].split("</table>", 1)[0]
    assert 'data-budget="keepalive_tls_p50_ms" data-status="fail"' in table
    assert 'data-budget="handshake_ms" data-status="skip"' in table  # no plain_new arm
    assert "needs the arms tls_new and plain_new" in table
    assert 'data-budget="failed_checks" data-status="' in table
    assert 'id="budgets-status">fail<' in page
    # A run without budgets has no table.
    other = make_run(owner, target_name="c")
    assert 'id="budget-table"' not in client.get(reverse("runs-detail", args=[other.code])).content.decode()


def test_a_full_run_quota_does_not_stop_editing_a_scenario(client, owner, scenario, settings, broker):
    settings.TOLLGATE_MAX_CONCURRENT_RUNS_PER_PROJECT = 1
    starting.start_run(owner, scenario.project, {}, scenario=scenario)  # queued: the project is full
    with pytest.raises(starting.RunRefused):
        starting.start_run(owner, scenario.project, {}, scenario=scenario)
    client.force_login(owner)
    response = client.post(reverse("scenarios-edit", args=[scenario.code]), edit_data(scenario, users=4))
    assert response.status_code == 302
    scenario.refresh_from_db()
    assert scenario.version == 2 and scenario.config["users"] == 4
