from django.urls import path

from portal.runs import views

urlpatterns = [
    path("", views.runs_list, name="runs-list"),
    path("new/", views.runs_new, name="runs-new"),
    path("<uuid:code>/", views.runs_detail, name="runs-detail"),
    path("<uuid:code>/progress.json", views.runs_progress, name="runs-progress"),
    path("<uuid:code>/report.json", views.runs_report_json, name="runs-report-json"),
    path("<uuid:code>/cancel/", views.runs_cancel, name="runs-cancel"),
]
