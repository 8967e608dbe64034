from django.urls import path

from datasets import views

urlpatterns = [
    path("", views.dataset_list, name="dataset-list"),
    path("new/", views.dataset_new, name="dataset-new"),
    path("new/preview/", views.dataset_preview, name="dataset-preview"),
    path("<int:pk>/", views.dataset_detail, name="dataset-detail"),
    path("<int:pk>/mean.png", views.dataset_mean, name="dataset-mean"),
    path("<int:pk>/skipped.json", views.dataset_skipped_download, name="dataset-skipped"),
    path("<int:pk>/cancel/", views.dataset_cancel_view, name="dataset-cancel"),
    path("<int:pk>/rebuild/", views.dataset_rebuild_view, name="dataset-rebuild"),
    path("<int:pk>/delete/", views.dataset_delete_view, name="dataset-delete"),
    path("<int:pk>/duplicates/", views.dataset_duplicates_check_view, name="dataset-check-duplicates"),
    path("<int:pk>/duplicates/drop-leaks/", views.dataset_drop_leaks_view, name="dataset-drop-leaks"),
    path("<int:pk>/versions/<int:number>/delete/", views.dataset_version_delete_view, name="dataset-version-delete"),
]
