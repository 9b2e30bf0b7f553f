from django.urls import path

from portal.signing import views

urlpatterns = [
    path(".well-known/tollgate-report-keys.json", views.report_keys, name="signing-keys"),
    path(f".well-known/{views.VERIFIER_FILENAME}", views.verifier, name="signing-verifier"),
]
