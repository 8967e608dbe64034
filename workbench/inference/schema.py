"""The API's OpenAPI schema class (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]).

Most API views are plain `@api_view` functions that build their JSON by hand. drf-spectacular
cannot guess their bodies and warns once per view, which also fails `check --deploy` (its deploy
check generates the schema). Here such views are described as free-form JSON objects, and a GET
on a collection path is named `..._list`, so list and detail operations get distinct ids.
Views that declare their bodies (`@extend_schema`, serializers) are described exactly.

The error answers every view shares are added here, from what the operation is, so each view
only declares its own (409, 413, 429): 400 where it reads a body or query parameters, 415 where
it reads a body, 401 and 403 where it needs a login, 404 where the path names an object.
"""

from __future__ import annotations

import re

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.types import OpenApiTypes
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import AllowAny

from workbench.core.openapi import COMPONENTS, SHARED_ERRORS


def error_ref(registry, name: str = "Error") -> dict:
    component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=COMPONENTS[name])
    registry.register_on_missing(component)
    return component.ref


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

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        parameters = operation.get("parameters", [])
        # The token endpoint (no permission classes) is open to anonymous callers.
        needs_login = any(not isinstance(p, AllowAny) for p in self.view.get_permissions())
        applies = {
            "400": "requestBody" in operation or any(p["in"] == "query" for p in parameters),
            "401": needs_login,
            "403": needs_login,
            "404": any(p["in"] == "path" for p in parameters),
            "415": "requestBody" in operation,
        }
        responses = operation["responses"]
        for code, (description, component) in SHARED_ERRORS.items():
            if applies[code] and code not in responses:
                schema = error_ref(registry, component)
                responses[code] = {"description": description, "content": {"application/json": {"schema": schema}}}
        return operation
