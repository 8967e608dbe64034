from django.contrib import admin

from workbench.runs.models import Run, WorkerHost


@admin.register(WorkerHost)
class WorkerHostAdmin(admin.ModelAdmin):
    list_display = ("hostname", "last_seen", "started_at")


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "dataset", "network", "state", "progress", "created_at")
    list_filter = ("state", "network")
    search_fields = ("name", "owner__username")
