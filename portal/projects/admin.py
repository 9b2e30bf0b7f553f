from django.contrib import admin

from portal.projects.models import Membership, Project, ProjectQuota


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


class QuotaInline(admin.StackedInline):
    # Operators only (the admin): empty fields keep the defaults from settings.
    model = ProjectQuota
    extra = 0
    max_num = 1


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "personal_of", "created"]
    search_fields = ["name"]
    inlines = [MembershipInline, QuotaInline]
