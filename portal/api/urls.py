from django.urls import path, re_path
from drf_spectacular.views import SpectacularJSONAPIView

from portal.api import errors, scenarios, schedules, views
from portal.api.docs import api_docs

urlpatterns = [
    path("runs", views.Runs.as_view(), name="api-runs"),
    path("runs/<uuid:id>", views.RunDetail.as_view(), name="api-run"),
    path("runs/<uuid:id>/report", views.RunReport.as_view(), name="api-run-report"),
    path("runs/<uuid:id>/cancel", views.RunCancel.as_view(), name="api-run-cancel"),
    path("runs/<uuid:id>/shares", views.RunShares.as_view(), name="api-run-shares"),
    path("runs/<uuid:id>/baseline", views.RunBaseline.as_view(), name="api-run-baseline"),
    path("targets", views.Targets.as_view(), name="api-targets"),
    path("scenarios", scenarios.Scenarios.as_view(), name="api-scenarios"),
    path("scenarios/<uuid:id>", scenarios.ScenarioDetail.as_view(), name="api-scenario"),
    path("scenarios/<uuid:id>/schedule", schedules.ScenarioSchedule.as_view(), name="api-scenario-schedule"),
    path("schema", SpectacularJSONAPIView.as_view(), name="api-schema"),
    path("docs", api_docs, name="api-docs"),
    # [\s\S], not ".": a path with a newline in it (%0A) is no endpoint either, and answers in JSON.
    re_path(r"^[\s\S]*$", errors.not_found, name="api-not-found"),
]
