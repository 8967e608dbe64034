"""The API's OpenAPI schema class (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]).

Most API views are plain `@api_view` functions that build their JSON by hand. drf-spectacular
cannot guess their bodies and warns once per view, which also fails `check --deploy` (its deploy
check generates the schema). Here such views are described as free-form JSON objects, and a GET
on a collection path is named `..._list`, so list and detail operations get distinct ids.
Views that declare their bodies (`@extend_schema`, serializers) are described exactly.
"""

from __future__ import annotations

import re

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from rest_framework.generics import GenericAPIView


class WorkbenchAutoSchema(AutoSchema):
    def _get_serializer(self):
        view = self.view
        declares = any(callable(getattr(view, name, None)) for name in ("get_serializer", "get_serializer_class"))
        if not isinstance(view, GenericAPIView) and not declares and not hasattr(view, "serializer_class"):
            return OpenApiTypes.OBJECT
        return super()._get_serializer()

    def get_operation_id(self) -> str:
        operation_id = super().get_operation_id()
        if self.method == "GET" and operation_id.endswith("_retrieve") and not re.search(r"\{[^}/]+\}/?$", self.path):
            return operation_id.removesuffix("_retrieve") + "_list"
        return operation_id
