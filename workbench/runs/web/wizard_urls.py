"""The new-run page, its live previews, and run management (included by workbench/runs/web/urls.py)."""

from django.urls import path

from workbench.runs.web import manage_views, wizard_views

urlpatterns = [
    path("new/", wizard_views.run_new, name="run-new"),
    path("new/lr-preview/", wizard_views.lr_preview, name="run-new-lr-preview"),
    path("new/layer-shapes/", wizard_views.layer_shapes, name="run-new-layer-shapes"),
    path("new/networks/", wizard_views.network_fit, name="run-new-networks"),
    path("new/placement/", wizard_views.placement, name="run-new-placement"),
    path("new/augment-preview/", wizard_views.augment_preview, name="run-new-augment-preview"),
    path("bulk/", manage_views.run_bulk, name="run-bulk"),
    path("<int:pk>/edit/", manage_views.run_edit, name="run-edit"),
    path("<int:pk>/delete/", manage_views.run_delete, name="run-delete"),
    path("<int:pk>/abort/", manage_views.run_abort, name="run-abort"),
    path("<int:pk>/retrain/", manage_views.run_retrain, name="run-retrain"),
]
