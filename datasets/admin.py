from django.contrib import admin

from datasets.models import Dataset


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "kind", "status", "image_width", "image_height", "channels", "created_at")
    list_filter = ("status", "kind")
    search_fields = ("name", "owner__username")
    readonly_fields = (
        "labels",
        "splits",
        "skipped_count",
        "size_bytes",
        "images_per_second",
        "started_at",
        "finished_at",
        "progress_done",
        "progress_total",
    )
