from django.contrib import admin

from portal.alerts.models import AlertChannel, AlertDelivery


@admin.register(AlertChannel)
class AlertChannelAdmin(admin.ModelAdmin):
    list_display = ("project", "kind", "target", "enabled", "improvements")


@admin.register(AlertDelivery)
class AlertDeliveryAdmin(admin.ModelAdmin):
    list_display = ("alert", "kind", "target", "attempt", "status", "response_status", "created")
    readonly_fields = [f.name for f in AlertDelivery._meta.fields]
