from django.urls import path

from portal.alerts import views

urlpatterns = [
    path("", views.alerts_list, name="alerts-list"),
]
