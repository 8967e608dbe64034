from django.contrib import admin

from workbench.inference.models import InferenceJob


@admin.register(InferenceJob)
class InferenceJobAdmin(admin.ModelAdmin):
    list_display = ("id", "kind", "run", "owner", "state", "progress_done", "progress_total", "created_at")
    list_filter = ("kind", "state")
