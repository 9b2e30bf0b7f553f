from django.contrib import admin

from portal.projects.models import Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "personal_of", "created"]
    search_fields = ["name"]
    inlines = [MembershipInline]
