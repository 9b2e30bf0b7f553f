from django.contrib import admin

from portal.hooks.models import CallbackDelivery, WebhookDelivery, WebhookTrigger


@admin.register(WebhookTrigger)
class WebhookTriggerAdmin(admin.ModelAdmin):
    """For operators: which scenarios have webhooks, who owns their runs, disable one. The secrets
    (and the URL's id, a credential too) are never shown."""

    list_display = ("scenario", "format", "created_by", "enabled", "rate_per_minute", "created", "rotated_at")
    list_filter = ("format", "enabled")
    search_fields = ("scenario__name", "created_by__username")
    fields = ("scenario", "format", "created_by", "enabled", "rate_per_minute", "created", "rotated_at")
    readonly_fields = ("scenario", "created_by", "created", "rotated_at")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ("received_at", "trigger", "status_code", "outcome", "ip")
    list_filter = ("status_code",)
    fields = (
        "trigger",
        "received_at",
        "status_code",
        "outcome",
        "idempotency_key",
        "run",
        "ip",
        "body_bytes",
    )
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(CallbackDelivery)
class CallbackDeliveryAdmin(admin.ModelAdmin):
    list_display = ("created", "run", "attempt", "status", "response_status", "error")
    list_filter = ("status",)
    fields = (
        "run",
        "url",
        "attempt",
        "status",
        "response_status",
        "error",
        "created",
        "sent_at",
        "next_attempt_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False
