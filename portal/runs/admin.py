from django.contrib import admin

from portal.runs.models import Run, RunAttempt


class RunAttemptInline(admin.TabularInline):
    """Who executed the run, when, and how each attempt ended (heartbeat, deadline, arm in progress)."""

    model = RunAttempt
    fields = ("number", "worker", "host", "claimed", "heartbeat", "deadline", "current_arm", "ended",
              "outcome", "reason")  # fmt: skip
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """For operators: find a run, see its state, cancel or delete it. Measurements are not edited here."""

    list_display = ("code", "owner", "target", "status", "source", "created", "finished")
    list_filter = ("status", "source")
    search_fields = ("code", "owner__username", "target__name")
    date_hierarchy = "created"
    inlines = [RunAttemptInline]
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
    )

    def has_add_permission(self, request) -> bool:
        return False
