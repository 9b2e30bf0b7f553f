from django.urls import path

from portal.hooks import receive, views

urlpatterns = [
    path("scenario/<uuid:code>/", views.scenario_webhook, name="hooks-scenario"),
    # Public: the unguessable id and the signature are the credentials (docs/ci.md).
    path("<str:public_id>", receive.receive, name="hooks-receive"),
]
