"""REST routes of inference, mounted at /api/."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.permissions import IsAuthenticated

from workbench.inference import api, docs, network_api

urlpatterns = [
    path("runs/<int:pk>/classify/", api.classify, name="api-run-classify"),
    path("runs/<int:pk>/detect/", api.detect, name="api-run-detect"),
    path("runs/<int:pk>/segment/", api.segment, name="api-run-segment"),
    path("runs/<int:pk>/classify-many/", api.classify_many, name="api-run-classify-many"),
    path("runs/<int:pk>/detect-many/", api.detect_many, name="api-run-detect-many"),
    path("runs/<int:pk>/segment-many/", api.segment_many, name="api-run-segment-many"),
    path("runs/<int:pk>/test/", api.test, name="api-run-test"),
    path("runs/<int:pk>/inside/", api.inside, name="api-run-inside"),
    path("runs/<int:pk>/checkpoints/", api.checkpoints, name="api-run-checkpoints"),
    path("runs/<int:pk>/download/", api.download, name="api-run-download"),
    path("runs/<int:pk>/network/", network_api.run_network, name="api-run-network"),
    path("networks/graph/", network_api.network_graph, name="api-network-graph"),
    path("inference/jobs/<int:pk>/", api.job_detail, name="api-inference-job"),
    path("inference/jobs/<int:pk>/rows/", api.job_rows, name="api-inference-job-rows"),
    path("inference/jobs/<int:pk>/results.csv", api.job_csv, name="api-inference-job-csv"),
    path(
        "schema/",
        SpectacularAPIView.as_view(custom_settings=docs.SCHEMA_SETTINGS, permission_classes=[IsAuthenticated]),
        name="api-schema",
    ),
    path("docs/", docs.SwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", docs.RedocView.as_view(url_name="api-schema"), name="api-redoc"),
]
