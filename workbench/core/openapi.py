"""Pieces of the API's OpenAPI schema that every app's @extend_schema uses: the error bodies and
a schema of a Django form's fields. A leaf module (Django and drf-spectacular only), so datasets,
runs and inference can all use it; the schema class itself is workbench/inference/schema.py.
"""

from __future__ import annotations

from django import forms
from drf_spectacular.utils import OpenApiResponse

MESSAGES = {"type": "array", "items": {"type": "string"}}

ERROR = {
    "type": "object",
    "description": "What went wrong, in words.",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}

BAD_REQUEST = {
    "type": "object",
    "description": (
        "What was wrong with the request: `detail` for the request as a whole (a body that is "
        "not a JSON object, for one), or a list of messages per field, under `errors` or at the "
        "top level, nested like the fields."
    ),
    "properties": {
        "detail": {"oneOf": [{"type": "string"}, MESSAGES]},
        "errors": {"type": "object", "additionalProperties": MESSAGES},
    },
    "additionalProperties": {"oneOf": [{"type": "string"}, MESSAGES, {"type": "object"}]},
}

# status -> (description, component name): the answers added to every operation they apply to.
SHARED_ERRORS = {
    "400": ("The request is invalid; the body says what to change.", "BadRequest"),
    "401": ("Not signed in: send `Authorization: Token <key>` or a session cookie.", "Error"),
    "403": ("Not allowed: a staff-only action, or a session request without its CSRF token.", "Error"),
    "404": ("No such object, or not yours (the same answer for both).", "Error"),
    "415": ("The body's content type is not one this operation reads.", "Error"),
}
COMPONENTS = {"Error": ERROR, "BadRequest": BAD_REQUEST}


def error(description: str):
    """An error answer `{"detail": "..."}` for @extend_schema(responses=...)."""
    return OpenApiResponse(response=ERROR, description=description)


def bad_request(description: str = SHARED_ERRORS["400"][0]):
    return OpenApiResponse(response=BAD_REQUEST, description=description)


def form_schema(form_class, *, exclude: tuple[str, ...] = (), defaults: dict | None = None) -> dict:
    """A JSON schema of a Django form's fields and their rules, so the form stays their one home.

    `defaults`: the values a view fills in for missing fields; those fields are not required.
    """
    defaults = defaults or {}
    properties, required = {}, []
    for name, field in form_class.base_fields.items():
        if name in exclude:
            continue
        if isinstance(field, forms.ChoiceField):
            prop = {"enum": [value for value, _ in field.choices]}
        elif isinstance(field, forms.IntegerField):
            prop = {"type": "integer"}
            for rule, key in (("min_value", "minimum"), ("max_value", "maximum")):
                if getattr(field, rule, None) is not None:
                    prop[key] = getattr(field, rule)
        elif isinstance(field, forms.BooleanField):
            prop = {"type": "boolean"}
        else:
            prop = {"type": "string"}
            if getattr(field, "max_length", None):
                prop["maxLength"] = field.max_length
        if field.label:
            prop["description"] = str(field.label)
        if field.help_text:
            prop["description"] = f"{prop.get('description', '')} {field.help_text}".strip()
        if name in defaults:
            prop["default"] = defaults[name]
        properties[name] = prop
        if field.required and name not in defaults:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}
