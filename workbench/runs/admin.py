from django.contrib import admin

from workbench.runs.models import Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "dataset", "network", "state", "progress", "created_at")
    list_filter = ("state", "network")
    search_fields = ("name", "owner__username")
