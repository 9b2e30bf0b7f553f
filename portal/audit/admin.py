from django.contrib import admin

from portal.audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """Read-only: the log is written by the portal, never edited."""

    list_display = ("time", "kind", "actor_name", "ip", "project_id")
    list_filter = ("kind",)
    search_fields = ("actor_name", "ip")
    date_hierarchy = "time"

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
