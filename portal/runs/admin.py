from django.contrib import admin

from portal.runs.models import Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """For operators: find a run, see its state, cancel or delete it. Measurements are not edited here."""

    list_display = ("code", "owner", "target", "status", "source", "created", "finished")
    list_filter = ("status", "source")
    search_fields = ("code", "owner__username", "target__name")
    date_hierarchy = "created"
    # The submitted config holds sealed secrets (headers, credentials): never shown.
    fields = (
        "code",
        "owner",
        "target",
        "scenario",
        "status",
        "cancel_requested",
        "error",
        "source",
        "created",
        "started",
        "finished",
        "heartbeat",
    )
    readonly_fields = (
        "code",
        "owner",
        "target",
        "scenario",
        "status",
        "error",
        "source",
        "created",
        "started",
        "finished",
        "heartbeat",
    )

    def has_add_permission(self, request) -> bool:
        return False
