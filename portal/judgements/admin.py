from django.contrib import admin

from portal.judgements.models import Judgement


@admin.register(Judgement)
class JudgementAdmin(admin.ModelAdmin):
    list_display = ("run", "scenario", "status", "created")
    readonly_fields = ("run", "scenario", "baseline", "status", "tolerance_pct", "result", "created")
