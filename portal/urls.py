from allauth.account.decorators import secure_admin_login
from django.contrib import admin
from django.urls import include, path
from django.views.generic.base import RedirectView

# One way in: the admin's own login form would check a password without the lock-out, the
# per-address limit or the second factor. allauth's guard sends whoever is not signed in to the
# portal's login (allauth: all of those, and the audit log) with ?next=, and refuses a signed-in
# non-staff user (403).
admin.site.login = secure_admin_login(admin.site.login)

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs-list", permanent=False)),
    path("accounts/", include("allauth.urls")),
    path("audit/", include("portal.projects.audit_urls")),
    path("runs/", include("portal.runs.urls")),
    path("targets/", include("portal.targets.urls")),
    path("projects/", include("portal.projects.urls")),
    path("scenarios/", include("portal.scenarios.urls")),
    path("s/", include("portal.sharing.urls")),
    path("shares/", include("portal.sharing.owner_urls")),
    path("api/v1/", include("portal.api.urls")),
    path("tokens/", include("portal.api.token_urls")),
    path("hooks/", include("portal.hooks.urls")),
    path("schedules/", include("portal.schedules.urls")),
    path("alerts/", include("portal.alerts.urls")),
    path("", include("portal.signing.urls")),  # /.well-known/tollgate-report-keys.json
    path("", include("portal.ops.urls")),  # /healthz, /readyz, /metrics, /ops/
    path("admin/", admin.site.urls),
]

# Django's default reads the request body again and fails on the body that caused the 400.
handler400 = "portal.errors.bad_request"
