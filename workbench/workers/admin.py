from django.contrib import admin

from workbench.workers.models import WorkerHost


@admin.register(WorkerHost)
class WorkerHostAdmin(admin.ModelAdmin):
    list_display = ("hostname", "last_seen", "started_at")
