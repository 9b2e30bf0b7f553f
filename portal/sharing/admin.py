from django.contrib import admin

from portal.sharing.models import ShareLink


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    """For operators: find a link, see its views and state. Links are made and revoked in the portal
    or with ``tollgate share``; the token is never stored, so it cannot be shown here."""

    list_display = ("code", "project", "kind", "created_by", "note", "created", "expires_at", "revoked_at")
    list_filter = ("kind",)
    search_fields = ("code", "note", "created_by__username", "project__name")
    date_hierarchy = "created"
    readonly_fields = [field.name for field in ShareLink._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
