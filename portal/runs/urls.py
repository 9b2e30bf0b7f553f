from django.urls import path

from portal.runs import deletion, views

urlpatterns = [
    path("", views.runs_list, name="runs-list"),
    path("new/", views.runs_new, name="runs-new"),
    path("<uuid:code>/", views.runs_detail, name="runs-detail"),
    path("<uuid:code>/progress.json", views.runs_progress, name="runs-progress"),
    path("<uuid:code>/report.json", views.runs_report_json, name="runs-report-json"),
    path("<uuid:code>/report.csv", views.runs_report_csv, name="runs-report-csv"),
    path("<uuid:code>/cancel/", views.runs_cancel, name="runs-cancel"),
    path("<uuid:code>/delete/", deletion.runs_delete, name="runs-delete"),
    path("<uuid:code>/baseline/", views.runs_pin_baseline, name="runs-pin-baseline"),
    path("compare/", views.runs_compare, name="runs-compare"),
    path("trend/<uuid:target>/", views.target_trend, name="target-trend"),
]
