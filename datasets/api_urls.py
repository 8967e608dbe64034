"""REST routes of the datasets app, mounted at /api/datasets/."""

from django.urls import path

from datasets import api, api_duplicates, api_versions

urlpatterns = [
    path("", api.dataset_collection, name="api-dataset-list"),
    path("uploads/", api.upload_create, name="api-dataset-upload"),
    path("label-check/", api.dataset_label_check_api, name="api-dataset-label-check"),
    path("uploads/<str:token>/", api.upload_chunk, name="api-dataset-upload-chunk"),
    path("<int:pk>/", api.dataset_item, name="api-dataset-detail"),
    path("<int:pk>/cancel/", api.dataset_cancel_api, name="api-dataset-cancel"),
    path("<int:pk>/rebuild/", api.dataset_rebuild_api, name="api-dataset-rebuild"),
    path("<int:pk>/gallery/", api.dataset_gallery_api, name="api-dataset-gallery"),
    path("<int:pk>/labels/", api.dataset_labels_api, name="api-dataset-labels"),
    path("<int:pk>/duplicates/", api_duplicates.dataset_duplicates_api, name="api-dataset-duplicates"),
    path("<int:pk>/versions/", api_versions.dataset_versions_api, name="api-dataset-versions"),
    path("<int:pk>/versions/<int:number>/", api_versions.dataset_version_api, name="api-dataset-version"),
]
