"""The public side of share links (``/s/<token>/…``): no login, read-only, nothing else of the portal.

The token is the credential. Every answer, errors included, carries ``X-Robots-Tag: noindex``,
``Referrer-Policy: no-referrer`` (the token is in the path: it must not leak to other sites) and
``Cache-Control: no-store`` (a revoked link must not live on in a cache). A wrong token is a 404, a
revoked or expired link a 410 that says which and when. Each use is logged (portal.sharing.services
.record_view)."""

from __future__ import annotations

import csv
from collections.abc import Callable
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from portal.lib.report import evidence
from portal.runs import exports, pages, reporting
from portal.runs.models import Run
from portal.sharing import services
from portal.sharing.models import ShareLink

SHARED_HEADERS = {
    "X-Robots-Tag": "noindex, nofollow",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


SHOWS = {ShareLink.Kind.RUN: "one run's report", ShareLink.Kind.COMPARE: "a compare view"}
NOT_FOUND = "No such share link (check that it was copied whole)."


def _with_headers(response: HttpResponse) -> HttpResponse:
    for name, value in SHARED_HEADERS.items():
        response[name] = value
    return response


def _error(request: HttpRequest, status: int, detail: str, as_json: bool, gone=None) -> HttpResponse:
    if as_json:
        return JsonResponse({"status": status, "errors": {}, "detail": detail}, status=status)
    return render(
        request, "sharing/gone.html", {"status": status, "detail": detail, "gone": gone}, status=status
    )


def _gone_detail(gone: services.ShareGone) -> str:
    when = gone.when.strftime("%Y-%m-%d %H:%M UTC")
    if gone.reason == "revoked":
        return f"This share link was revoked on {when}."
    return f"This share link expired on {when}."


def shared(kind: str | None, what: str, as_json: bool = False) -> Callable:
    """Resolve the token (404/410), check the link is of ``kind`` (None: either), log the view as
    ``what``, and set the headers of every shared answer."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(request: HttpRequest, token: str, **kwargs) -> HttpResponse:
            if request.method != "GET":
                response = HttpResponseNotAllowed(["GET"])
                return _with_headers(response)
            try:
                link = services.resolve(token)
                if kind is not None and link.kind != kind:
                    raise Http404(f"This share link shows {SHOWS[link.kind]}: it has no {what}.")
                response = view(request, link, token, **kwargs)
                services.record_view(link, request, what)
            except services.ShareGone as gone:
                response = _error(request, 410, _gone_detail(gone), as_json, gone)
            except Http404 as exc:
                detail = str(exc) if str(exc).startswith("This share link") else NOT_FOUND
                response = _error(request, 404, detail, as_json)
            return _with_headers(response)

        # Read-only: any other method is a 405 with the same headers (not the CSRF check's 403 page).
        return csrf_exempt(wrapper)

    return decorate


def _iso(value) -> str | None:
    return value.isoformat() if value else None


def _urls(token: str) -> dict:
    return {
        "page_url": reverse("sharing-view", args=[token]),
        "json_download_url": reverse("sharing-report-json", args=[token]) + "?download=1",
        "csv_url": reverse("sharing-report-csv", args=[token]),
        "compare_json_url": reverse("sharing-compare-json", args=[token]),
    }


def _compare_runs(link: ShareLink) -> list[Run]:
    found = {
        str(run.code): run
        for run in Run.objects.filter(project_id=link.project_id, code__in=link.run_codes)
        .select_related("target", "frozen_report")
        .defer("frozen_report__body")  # the page shows the signatures; a download reads the body
    }
    if len(found) != len(link.run_codes):
        raise Http404("a run of this compare view was deleted")
    return [found[code] for code in link.run_codes]


@shared(None, "page")
def share_page(request: HttpRequest, link: ShareLink, token: str) -> HttpResponse:
    ctx = {"link": link, "shared": True, **_urls(token)}
    if link.kind == ShareLink.Kind.COMPARE:
        runs = _compare_runs(link)
        ctx |= {"runs": runs, **pages.compare_section(runs, request, shared=True, extra={})}
        ctx["signed"] = _signed_runs(runs, token)
        return render(request, "sharing/compare.html", ctx)
    run = link.run
    ctx |= {"run": run, "target_label": run.target.name}
    ctx |= pages.report_section(
        run, shared=True, json_download_url=ctx["json_download_url"], target_label=run.target.name
    )
    # The digest and key of the frozen, signed report once the run has ended (portal.signing), reached
    # by its reverse accessor as on the run page.
    ctx["integrity"] = getattr(getattr(run, "frozen_report", None), "integrity", None)
    return render(request, "sharing/run.html", ctx)


def _signed_runs(runs: list[Run], token: str) -> list[dict]:
    """Per compared run: its report JSON under this link and, once frozen, its digest and key id, so
    an auditor of a compare view can verify every run in it (docs/auditors.md)."""
    return [
        {
            "number": number,
            "run": run,
            "json_url": reverse("sharing-compare-run-json", args=[token, run.code]) + "?download=1",
            "integrity": getattr(getattr(run, "frozen_report", None), "integrity", None),
        }
        for number, run in enumerate(runs, 1)
    ]


@shared(ShareLink.Kind.COMPARE, "run report.json", as_json=True)
def share_compare_run_json(request: HttpRequest, link: ShareLink, token: str, code) -> HttpResponse:
    """One run of a compare link: its report JSON (the frozen, signed one once it has ended)."""
    run = next((run for run in _compare_runs(link) if run.code == code), None)
    if run is None:
        raise Http404("This share link shows a compare view without that run.")
    response = JsonResponse(reporting.export_report(run, request), json_dumps_params={"indent": 2})
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="tollgate-run-{run.code}.json"'
    return response


@shared(ShareLink.Kind.RUN, "report.json", as_json=True)
def share_report_json(request: HttpRequest, link: ShareLink, token: str) -> HttpResponse:
    response = JsonResponse(reporting.export_report(link.run, request), json_dumps_params={"indent": 2})
    if request.GET.get("download"):
        response["Content-Disposition"] = f'attachment; filename="tollgate-run-{link.run.code}.json"'
    return response


@shared(ShareLink.Kind.RUN, "report.csv")
def share_report_csv(request: HttpRequest, link: ShareLink, token: str) -> HttpResponse:
    run = link.run
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="tollgate-run-{run.code}.csv"'
    csv.writer(response).writerows(exports.csv_rows(str(run.code), reporting.export_report(run, request)))
    return response


@shared(ShareLink.Kind.RUN, "status.json", as_json=True)
def share_status(request: HttpRequest, link: ShareLink, token: str) -> HttpResponse:
    """For CI polling: answers while the run is queued or running too; the headline, costs, budgets
    and checks appear once the run has ended (its summary)."""
    run = link.run
    summary = run.summary or {}
    said = evidence.status_text(run.status, run.error, evidence.summary_badge(run.status, summary))
    return JsonResponse(
        {
            "status": run.status,
            # As the API and the CLI say it: "incomplete: no cost could be computed — …".
            "status_line": said,
            "terminal": run.is_terminal,
            "error": run.error or None,
            "created": _iso(run.created),
            "started": _iso(run.started),
            "finished": _iso(run.finished),
            "headline": summary.get("headline"),
            "answers": summary.get("answers"),
            "costs": summary.get("costs"),
            "budgets": summary.get("budgets"),
            "checks": summary.get("checks"),
            "share_url": request.build_absolute_uri(reverse("sharing-view", args=[token])),
            "report_json_url": request.build_absolute_uri(reverse("sharing-report-json", args=[token])),
        },
        json_dumps_params={"indent": 2},
    )


@shared(ShareLink.Kind.COMPARE, "compare.json", as_json=True)
def share_compare_json(request: HttpRequest, link: ShareLink, token: str) -> HttpResponse:
    data = pages.compare_context(_compare_runs(link), request)["data"]
    return JsonResponse(data, json_dumps_params={"indent": 2})
