"""The API's JSON parser: a request body must be a JSON object.

Every view reads `request.data` as a mapping (`.get()`, `in`, a serializer's fields). DRF's own
JSONParser also hands back `5`, `"x"`, `null` or a list, on which those views failed with a 500.
This parser refuses them with a 400 that says what is expected, for every view that uses the
default parsers (REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]) or names this one.
"""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

NOT_AN_OBJECT = "The request body must be a JSON object ({{...}}), not {kind}."


def _kind(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "another JSON value"


class JSONObjectParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if not isinstance(data, dict):
            raise ParseError(NOT_AN_OBJECT.format(kind=_kind(data)))
        return data
