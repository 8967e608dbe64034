"""The OpenAPI schema and its browsable pages, served from the vendored sidecar (no CDN)."""

from __future__ import annotations

from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView, _get_sidecar_url
from rest_framework.permissions import IsAuthenticated

SCHEMA_SETTINGS = {
    "TITLE": "Workbench API",
    "DESCRIPTION": (
        "Datasets, training runs, the GPU queue and inference. Authenticate with a token "
        "(`Authorization: Token <key>`, from POST /api/auth/token/) or a browser session."
    ),
    "VERSION": "1",
}


class SwaggerView(SpectacularSwaggerView):
    permission_classes = [IsAuthenticated]
    title = "Workbench API"

    @staticmethod
    def _swagger_ui_resource(filename):
        return _get_sidecar_url(f"swagger-ui-dist/{filename}")

    @staticmethod
    def _swagger_ui_favicon():
        return _get_sidecar_url("swagger-ui-dist/favicon-32x32.png")


class RedocView(SpectacularRedocView):
    permission_classes = [IsAuthenticated]
    title = "Workbench API"

    @staticmethod
    def _redoc_standalone():
        return _get_sidecar_url("redoc/bundles/redoc.standalone.js")
