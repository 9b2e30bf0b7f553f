from django.contrib import admin

from portal.scenarios.models import Scenario


@admin.register(Scenario)
class ScenarioAdmin(admin.ModelAdmin):
    list_display = ("name", "created", "updated")
    search_fields = ("name",)
    # The config holds sealed secrets (headers, credentials): never shown, never edited here.
    exclude = ("config",)
    readonly_fields = ("code", "created", "updated")
