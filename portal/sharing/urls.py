"""Public, read-only share pages under ``/s/<token>/``: the token is the credential (no login)."""

from django.urls import path

from portal.sharing import views

urlpatterns = [
    path("<str:token>/", views.share_page, name="sharing-view"),
    path("<str:token>/report.json", views.share_report_json, name="sharing-report-json"),
    path("<str:token>/report.csv", views.share_report_csv, name="sharing-report-csv"),
    path("<str:token>/status.json", views.share_status, name="sharing-status"),
    path("<str:token>/compare.json", views.share_compare_json, name="sharing-compare-json"),
    path(
        "<str:token>/reports/<uuid:code>.json",
        views.share_compare_run_json,
        name="sharing-compare-run-json",
    ),
]
