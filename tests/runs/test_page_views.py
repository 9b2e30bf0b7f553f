"""Small truths of the report pages: cancel asks first, only a succeeded run is a baseline, compare
keeps the chosen reference, names tell targets apart, units beside numbers, the CSV carries verdicts
and checks, the progress JSON carries per-second points (real PostgreSQL, real cache)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.cache import cache
from django.urls import reverse

from portal.projects.models import personal_project
from portal.runs.live import progress_key, with_point
from portal.runs.models import ArmResult, Run
from portal.targets.models import Target
from tests.runs.factories import make_run

pytestmark = pytest.mark.django_db


def test_cancel_asks_for_confirmation_and_works_without_javascript(client, owner):
    run = make_run(owner, status=Run.Status.RUNNING, arms={})
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    cancel_url = reverse("runs-cancel", args=[run.code])
    # The run page links to a confirmation page; it holds no form that cancels in one click.
    assert f'href="{cancel_url}"' in page and f'action="{cancel_url}"' not in page
    assert "onclick" not in page and "onsubmit" not in page
    confirm = client.get(cancel_url).content.decode()
    assert "Yes, cancel the run" in confirm and 'name="confirm" value="yes"' in confirm
    assert "cut short" in confirm
    # A POST without the confirmation only shows the question again.
    assert "Yes, cancel the run" in client.post(cancel_url).content.decode()
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING and not run.cancel_requested
    client.post(cancel_url, {"confirm": "yes"})
    run.refresh_from_db()
    assert run.cancel_requested


def test_only_a_succeeded_run_can_be_pinned_as_baseline(client, owner):
    failed = make_run(owner, status=Run.Status.FAILED)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[failed.code])).content.decode()
    assert "Pin as baseline" not in page and "cannot be a baseline" in page
    response = client.post(reverse("runs-pin-baseline", args=[failed.code]), follow=True)
    failed.target.refresh_from_db()
    assert failed.target.baseline_id is None
    assert "A failed run cannot be a baseline" in response.content.decode()
    succeeded = make_run(owner)
    assert "Pin as baseline" in client.get(reverse("runs-detail", args=[succeeded.code])).content.decode()
    client.post(reverse("runs-pin-baseline", args=[succeeded.code]))
    succeeded.target.refresh_from_db()
    assert succeeded.target.baseline_id == succeeded.pk


def test_compare_without_javascript_puts_the_pinned_baseline_first(client, owner):
    first, second, third = (make_run(owner, summarize=True) for _ in range(3))
    Target.objects.filter(pk=third.target_id).update(baseline=third)
    client.force_login(owner)
    url = reverse("runs-compare")
    # The list's plain form: runs=a&runs=b&runs=c in the table's order.
    response = client.get(url, {"runs": [str(first.code), str(second.code), str(third.code)]})
    assert response["Location"].endswith(f"?runs={third.code},{first.code},{second.code}")
    # The canonical URL (what the list's script sends in the order ticked) is kept as it is.
    page = client.get(url, {"runs": f"{second.code},{first.code}"}).content.decode()
    assert page.index(f'data-run="{second.code}"') < page.index(f'data-run="{first.code}"')
    assert f"?runs={first.code},{second.code}" in page  # "make this the reference"


def test_targets_with_one_name_are_told_apart_by_port_in_lists(client, owner):
    a = Target.objects.create(project=personal_project(owner), name="shop", tls_url="https://127.0.0.1:8443/")
    b = Target.objects.create(project=personal_project(owner), name="shop", tls_url="https://127.0.0.1:9443/")
    for target in (a, b):
        run = make_run(owner)
        Run.objects.filter(pk=run.pk).update(target=target)
    client.force_login(owner)
    runs_page = client.get(reverse("runs-list")).content.decode()
    targets_page = client.get(reverse("targets-list")).content.decode()
    for page in (runs_page, targets_page):
        assert "shop (127.0.0.1:8443)" in page and "shop (127.0.0.1:9443)" in page
    detail = client.get(reverse("runs-detail", args=[Run.objects.filter(target=b).get().code]))
    assert "<h1>shop (127.0.0.1:9443)" in detail.content.decode()


def test_cost_table_names_metrics_in_words_and_gives_intervals_units(client, owner):
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100}, seconds=8)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    table = page[page.index('id="cost-table"') : page.index("</table>", page.index('id="cost-table"'))]
    assert "time to last byte, median (ms)" in table and "throughput (req/s)" in table
    assert ">ttlb_p50_us<" not in table
    row = table[table.index('data-metric="ttlb_p50_us"') :]
    row = row[: row.index("</tr>")]
    assert "+0.10 ms" in row and "… +0.10 ms" in row and "seconds (8/8)" in row


def test_cut_short_arms_are_labelled_so_and_never_finished(client, owner):
    run = make_run(owner, status=Run.Status.CANCELLED)
    ArmResult.objects.filter(run=run, arm="tls_new").update(complete=False)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert page.count(">cut short</span>") >= 2  # per-arm and time tables
    rows = list(
        csv.reader(io.StringIO(client.get(reverse("runs-report-csv", args=[run.code])).content.decode()))
    )
    flags = {r[1]: r[4] for r in rows if r[2] == "complete"}
    assert flags == {"plain": "true", "tls": "true", "tls_new": "false"}


def test_csv_has_verdicts_interval_methods_and_every_validity_check(client, owner):
    run = make_run(owner, arms={"plain": [400] * 100, "tls": [500] * 100}, seconds=8)
    client.force_login(owner)
    report = client.get(reverse("runs-report-json", args=[run.code])).json()
    rows = list(
        csv.DictReader(io.StringIO(client.get(reverse("runs-report-csv", args=[run.code])).content.decode()))
    )
    by_key = {(r["arm"], r["metric"], r["statistic"]): r for r in rows}
    assert len(by_key) == len(rows)
    assert by_key[("", "run", "status")]["value"] == "succeeded"
    for cost in report["costs"]:
        key = (f"{cost['arm']}-{cost['base']}", f"cost:{cost['name']}:{cost['metric']}")
        assert by_key[(*key, "verdict")]["value"] == (cost["verdict"] or "")
        assert by_key[(*key, "ci_method")]["value"] == cost["ci_method"]
    for check in report["validity"]:
        assert by_key[("", f"check:{check['check']}", "status")]["value"] == check["status"]
        assert by_key[("", f"check:{check['check']}", "detail")]["value"] == check["detail"]
        if check["evidence"]:
            evidence = by_key[("", f"check:{check['check']}", "evidence")]["value"]
            assert json.loads(evidence) == json.loads(json.dumps(check["evidence"], default=str))


def test_progress_json_carries_per_second_points_of_every_arm_so_far(client, owner):
    run = make_run(owner, status=Run.Status.RUNNING, arms={"plain": [400] * 30}, seconds=3)
    live = None
    for t_s, p50 in ((1, 510), (2, 520)):
        message = {"type": "progress", "arm": "tls", "arm_index": 1, "phase": "measure", "elapsed_s": 5.0}
        message |= {"planned_s": 10.0, "rps": 10.0, "users": 2, "arms_done": ["plain"]}
        message["second"] = {"t_s": t_s, "requests": 10, "p50_us": p50, "p95_us": 900}
        live = with_point(message, live)
    cache.set(progress_key(run.code), live)
    client.force_login(owner)
    data = client.get(reverse("runs-progress", args=[run.code])).json()
    plain, tls = data["series"]
    assert plain["arm"] == "plain" and plain["state"] == "measured" and len(plain["requests"]) == 3
    assert tls == {
        "arm": "tls",
        "state": "measuring",
        "requests": [10, 10],
        "p50_us": [510, 520],
        "p95_us": [900, 900],
    }
    # The next arm's warm-up starts a fresh series; once the arm is stored its points come from it.
    warmup = {**message, "arm": "tls_new", "arm_index": 2, "phase": "warmup", "second": None}
    cache.set(progress_key(run.code), with_point(warmup, live))
    data = client.get(reverse("runs-progress", args=[run.code])).json()
    assert [s["state"] for s in data["series"]] == ["measured", "warming up"]
    assert data["series"][1]["requests"] == []
    cache.delete(progress_key(run.code))


def test_projection_uses_the_local_process_the_page_shows_beside_it(client, owner):
    local = {"plain": 0.02, "tls": 0.03, "tls_new": 0.65}
    run = make_run(owner, local_cpu_ms=local)
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    formula = page[page.index('id="projection-formula"') :]
    formula = formula[: formula.index("</p>")]
    assert 'data-source="local_process"' in formula and "<code>tollgate-demo</code>" in formula
    assert "0.0300 − 0.0200 = 0.0100 CPU-ms" in formula and "0.6500 − 0.0200 = 0.6300 CPU-ms" in formula
    assert 'id="generator-cpu-table"' in page  # the figures it uses, on the same page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("facts", "shown"),
    [
        ({"session_ticket_issued": True, "session_ticket": False}, "issued; no reconnect resumed with it"),
        ({"session_ticket_issued": True, "session_ticket": True}, "issued; a reconnect with it resumed"),
    ],
)
def test_tls_facts_tell_a_ticket_issued_from_a_ticket_that_resumed(client, owner, facts, shown):
    run = make_run(owner, arms={"plain": [300] * 50, "tls": [400] * 50})
    Run.objects.filter(pk=run.pk).update(tls_info={"protocol": "TLSv1.3", "session_id": None, **facts})
    client.force_login(owner)
    page = client.get(reverse("runs-detail", args=[run.code])).content.decode()
    assert shown in page and "not applicable (TLS 1.3)" in page
