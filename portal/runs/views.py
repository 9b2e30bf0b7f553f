from __future__ import annotations

import csv
from datetime import date

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.dateparse import parse_date
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from portal.lib.report import evidence
from portal.projects.access import can, current_project, require_role
from portal.projects.models import Role
from portal.runs import exports, pages, quotas, reporting, runpage, services, starting
from portal.runs.access import get_run_for_user, may_delete_run, runs_for
from portal.runs.forms import RunForm
from portal.runs.live import progress_data, queue_note
from portal.runs.models import Run
from portal.scenarios.access import scenarios_for
from portal.scenarios.secrets import (
    SCENARIO_ONLY_KEYS,
    SavedSecrets,
    find_scenario,
    secret_origins,
)
from portal.targets import editing
from portal.targets.access import targets_for
from portal.targets.naming import labels_of, target_labels

SORTS = {
    "-created": ("-created", "newest first"),
    "created": ("created", "oldest first"),
    "target": ("target__name", "target"),
    "status": ("status", "status"),
}


@login_required
@require_GET
def runs_list(request: HttpRequest) -> HttpResponse:
    # Queries: the current project (1), the page of runs with their targets (1), the count for the
    # paginator (1), the targets for the filter (1). The run list shows the current project only.
    project, _ = current_project(request)
    runs = runs_for(request.user).filter(project=project).select_related("target")
    targets = list(targets_for(request.user).filter(project=project).order_by("name"))
    chosen = {key: request.GET.get(key, "") for key in ("target", "status", "since", "until", "sort")}
    errors = []
    if chosen["target"]:
        try:
            runs = runs.filter(target__code=chosen["target"])
        except ValidationError:
            errors.append("Unknown target.")
    if chosen["status"] in Run.Status.values:
        runs = runs.filter(status=chosen["status"])
    for key, lookup in (("since", "created__date__gte"), ("until", "created__date__lte")):
        if chosen[key]:
            day = _date(chosen[key])
            if day is None:
                errors.append(f"'{chosen[key]}' is not a date (YYYY-MM-DD).")
            else:
                runs = runs.filter(**{lookup: day})
    order, _ = SORTS.get(chosen["sort"], SORTS["-created"])
    runs = runs.order_by(order, "-pk")
    page = Paginator(runs, 25).get_page(request.GET.get("page"))
    for run in page.object_list:
        run.badge = evidence.summary_badge(run.status, run.summary)
    query = request.GET.copy()
    query.pop("page", None)
    ctx = {
        "page": page,
        "targets": targets,
        "statuses": Run.Status.values,
        "sorts": [(key, label) for key, (_, label) in SORTS.items()],
        "chosen": chosen,
        "errors": errors,
        "query": query.urlencode(),
        "cost_labels": COST_LABELS,
        # One column per cost: a new TLS connection (tls_new − plain) is not the handshake alone
        # (tls_new − plain_new).
        "list_costs": LIST_COSTS,
        "target_labels": labels_of(targets),
    }
    return render(request, "runs/list.html", ctx)


def _date(text: str) -> date | None:
    """A YYYY-MM-DD date, or None: parse_date raises for a well-formed impossible date (2024-13-45)."""
    try:
        return parse_date(text) if len(text) == 10 else None
    except ValueError:
        return None


def _codes(request: HttpRequest) -> list[str]:
    codes: list[str] = []
    for value in request.GET.getlist("runs"):
        codes.extend(code.strip() for code in value.split(",") if code.strip())
    return list(dict.fromkeys(codes))  # keep order, drop repeats


def _baseline_first(user, codes: list[str]) -> list[str]:
    """The list's checkboxes without JavaScript send the runs in the table's order, not the order
    ticked: then a pinned baseline among them is the reference (else the first in the table)."""
    try:
        pinned = {
            str(code)
            for code in runs_for(user)
            .filter(code__in=codes, baseline_of__isnull=False)
            .values_list("code", flat=True)
        }
    except ValidationError:
        return codes
    return [code for code in codes if code in pinned] + [code for code in codes if code not in pinned]


@login_required
@require_GET
def runs_compare(request: HttpRequest) -> HttpResponse:
    codes = _codes(request)
    # Canonical, bookmarkable form: ?runs=a,b,c, in the order given (the list's script sends the
    # order ticked, a pinned baseline first); the list's plain form sends runs=a&runs=b.
    if len(request.GET.getlist("runs")) > 1:
        return redirect(f"{reverse('runs-compare')}?runs={','.join(_baseline_first(request.user, codes))}")
    if not 2 <= len(codes) <= MAX_COMPARE:
        messages.warning(request, f"Choose between 2 and {MAX_COMPARE} runs to compare.")
        return redirect("runs-list")
    visible = runs_for(request.user).select_related("target")
    try:
        found = {str(run.code): run for run in visible.filter(code__in=codes)}
    except ValidationError:
        raise Http404("no such run") from None
    if len(found) != len(codes):
        raise Http404("no such run")  # one of them is not yours, or does not exist
    runs = [found[code] for code in codes]
    if request.GET.get("format") == "json":
        data = pages.compare_context(runs, request)["data"]
        return JsonResponse(data, json_dumps_params={"indent": 2})
    extra = {
        "target_labels": target_labels(targets_for(request.user), {run.target.name for run in runs}),
        # Each run as the reference: its code first, the others in their order.
        "as_reference": [",".join([code] + [c for c in codes if c != code]) for code in codes],
    }
    ctx = {"runs": runs, "codes": ",".join(codes), **extra}
    # The body of a compare of ended runs comes rendered from the cache (portal.runs.pages).
    ctx |= pages.compare_section(runs, request, shared=False, extra=extra)
    return render(request, "runs/compare.html", ctx)


@login_required
@require_GET
def target_trend(request: HttpRequest, target) -> HttpResponse:
    target_obj = get_object_or_404(targets_for(request.user), code=target)
    runs = list(
        runs_for(request.user)
        .filter(target=target_obj, status=Run.Status.SUCCEEDED)
        .order_by("created")
        .only("code", "created", "summary", "status", "target_id")[:500]
    )
    points: dict[str, list] = {}
    for run in runs:
        for cost in (run.summary or {}).get("costs", []):
            points.setdefault(cost["name"], []).append(
                {
                    "run": str(run.code),
                    "t": run.created.isoformat(),
                    "delta": cost["delta"],
                    "ci95": cost["ci95"],
                    "verdict": cost["verdict"],
                }
            )
    labels = target_labels(targets_for(request.user), [target_obj.name])
    ctx = {
        "target": target_obj,
        "target_label": labels[target_obj.code],
        "runs": runs,
        "points": points,
        # The legend names each cost as the table does, not by its report key.
        "point_labels": {name: COST_LABELS.get(name, name) for name in points},
        "cost_labels": COST_LABELS,
    }
    return render(request, "runs/trend.html", ctx)


@login_required
@require_http_methods(["GET", "POST"])
def runs_new(request: HttpRequest) -> HttpResponse:
    # A run is made in the current project: starting one needs the member role there.
    project, role = current_project(request)
    require_role(role, Role.MEMBER)
    scenarios = scenarios_for(request.user).filter(project=project).select_related("target")
    if request.method == "POST":
        # A run started from a saved scenario keeps the scenario's sealed secrets when the secret
        # fields are left blank (they are never rendered back into the form).
        code = request.POST.get("scenario")
        base = find_scenario(scenarios, code)
        form = RunForm(request.POST, saved=SavedSecrets.of(base), project=project)
        if code and base is None:
            form.add_error(None, "The saved scenario was not found (deleted, or not yours): start again.")
        if form.is_valid():
            return redirect(
                "runs-detail", code=starting.start_from_form(request.user, project, form, base).code
            )
        quotas.audit_refusals(request, project, form.quota_refusals)
    else:
        initial = {}
        base = find_scenario(scenarios, request.GET.get("scenario"))
        if request.GET.get("scenario"):
            if base is None:
                raise Http404("no such scenario")
            initial = {key: value for key, value in base.config.items() if key not in SCENARIO_ONLY_KEYS}
        form = RunForm(initial=initial or _default_initial(), project=project)
    known = editing.known_targets(project)
    ctx = {
        "form": form,
        "known_targets": known,
        "target_note": editing.target_note(known, *_typed_urls(form)),
        "too_short": form.too_short_for_intervals(),
        "scenarios": scenarios,
        "base": base,
        "base_has_secrets": bool(base and base.config.get("secrets")),
        "base_secret_origins": secret_origins(base),
    }
    return render(request, "runs/new.html", ctx)


def _typed_urls(form: RunForm) -> tuple[str, str]:
    """The plain and TLS URLs as the form would store them (cleaned when they are valid), else as
    typed or pre-filled."""
    cleaned = getattr(form, "cleaned_data", {})
    source = form.data if form.is_bound else form.initial
    return tuple(
        cleaned[name] if name in cleaned else str(source.get(name) or "") for name in ("plain_url", "tls_url")
    )


def _default_initial() -> dict:
    return {
        "plain_url": settings.TOLLGATE_DEFAULT_PLAIN_URL,
        "tls_url": settings.TOLLGATE_DEFAULT_TLS_URL,
        "verify_tls": settings.TOLLGATE_DEFAULT_VERIFY_TLS,
        "local_process": settings.TOLLGATE_DEFAULT_LOCAL_PROCESS,
    }


MAX_COMPARE = 10
COST_LABELS = pages.COST_LABELS
LIST_COSTS = ("keepalive_tls", "new_connection_tls", "handshake")


# Fields of a run its page does not read: its report section is stored (portal.runs.pages).
SECTION_FIELDS = ("engine", "tls_info", "server_software", "variants", "capacity", "probes")


@login_required
@require_GET
def runs_detail(request: HttpRequest, code) -> HttpResponse:
    # Queries: the user; the run's page state with the reader's role and its share links, the
    # reader's targets of its target's name (its label) (portal.runs.runpage.read_state): an ended run's
    # page is kept rendered by all that (3 queries). Rendering it reads the run (and the baseline's
    # code when another run is the baseline, the stored section, the share links), then the state
    # again.
    found = runpage.read_state(request.user, code)
    key = runpage.page_key(request, found)
    page = runpage.kept(key)
    if page is None:
        page, after = runpage.render(request, code, key, _detail_context(request, code, found))
        found = after or found
    return runpage.fill(page, request, found)


def _detail_context(request: HttpRequest, code, found: runpage.PageState) -> dict:
    related, deferred = ("scenario", "frozen_report"), ("frozen_report__body", *SECTION_FIELDS)
    run, role = get_run_for_user(request, code, related=related, deferred=deferred)
    is_baseline = run.target.baseline_id == run.pk
    baseline_code = None
    if run.target.baseline_id and not is_baseline:
        baseline_code = Run.objects.filter(pk=run.target.baseline_id).values_list("code", flat=True).first()
    target_label = found.label
    json_download_url = reverse("runs-report-json", args=[run.code]) + "?download=1"
    return {
        "run": run,
        "run_role": role,
        "can_write": can(role, Role.MEMBER),
        "can_delete": may_delete_run(request.user, run, role),
        "is_baseline": is_baseline,
        "baseline_code": baseline_code,  # "Compare with the baseline"
        # The button shows only without one; the reason the run failed is in its status line already.
        "baseline_refusal": services.baseline_refusal(run, with_reason=False),
        "target_label": target_label,
        "json_download_url": json_download_url,
        "queue_note": queue_note(run),  # a queued run: what it waits for
        **pages.report_section(
            run, shared=False, json_download_url=json_download_url, target_label=target_label
        ),
        # The signature of the frozen report (templates/signing/integrity.html), once the run has ended.
        "integrity": getattr(getattr(run, "frozen_report", None), "integrity", None),
    }


@login_required
@require_GET
def runs_report_csv(request: HttpRequest, code) -> HttpResponse:
    """One row per arm × metric (and one per cost), for spreadsheets."""
    run, _ = get_run_for_user(request, code)
    data = reporting.run_report(run, request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="tollgate-run-{run.code}.csv"'
    csv.writer(response).writerows(exports.csv_rows(str(run.code), data))
    return response


@login_required
@require_POST
def runs_pin_baseline(request: HttpRequest, code) -> HttpResponse:
    run, role = get_run_for_user(request, code)
    require_role(role, Role.MEMBER)
    target = run.target
    if request.POST.get("unpin"):  # never pins, even from a page older than the pin it shows
        if services.unpin_baseline(run):
            messages.info(request, f"Run unpinned: {target.name} has no baseline now.")
        return redirect("runs-detail", code=run.code)
    try:
        services.pin_baseline(run)
    except services.NotABaseline as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, f"Pinned as the baseline of {target.name}: compares start from it.")
    return redirect("runs-detail", code=run.code)


@login_required
@require_GET
def runs_progress(request: HttpRequest, code) -> JsonResponse:
    run, _ = get_run_for_user(request, code)
    return JsonResponse(progress_data(run))


@login_required
@require_GET
def runs_report_json(request: HttpRequest, code) -> JsonResponse:
    run, _ = get_run_for_user(request, code)
    response = JsonResponse(reporting.export_report(run, request), json_dumps_params={"indent": 2})
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="tollgate-run-{run.code}.json"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def runs_cancel(request: HttpRequest, code) -> HttpResponse:
    """GET asks for confirmation (a page: works without JavaScript); POST with ``confirm`` cancels."""
    run, role = get_run_for_user(request, code)
    require_role(role, Role.MEMBER)
    if run.is_terminal:
        messages.warning(request, f"The run has already {run.status}.")
        return redirect("runs-detail", code=run.code)
    if request.method == "GET" or request.POST.get("confirm") != "yes":
        labels = target_labels(targets_for(request.user), [run.target.name])
        return render(request, "runs/cancel.html", {"run": run, "target_label": labels[run.target.code]})
    # A queued run is cancelled on the spot; a running one is asked to stop and keeps its arms.
    outcome = services.cancel(run)
    if outcome == services.CANCELLED:
        messages.info(
            request, "Run cancelled before it started." if run.started is None else "Run cancelled."
        )
    elif outcome == services.STOPPING:
        messages.info(
            request, "Stopping the run; what was measured so far is kept, the current arm marked cut short."
        )
    else:
        run.refresh_from_db()
        messages.warning(request, f"The run has already {run.status}.")
    return redirect("runs-detail", code=run.code)
