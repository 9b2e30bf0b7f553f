from django.contrib import admin

from portal.schedules.models import Firing, Schedule


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ("scenario", "cron", "time_zone", "enabled", "created_by")
    readonly_fields = ("code", "periodic_task", "created", "updated")


@admin.register(Firing)
class FiringAdmin(admin.ModelAdmin):
    list_display = ("schedule", "at", "outcome", "reason")
    readonly_fields = ("schedule", "task_id", "at", "outcome", "reason", "run")
