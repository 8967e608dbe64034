"""`/api/datasets/<id>/duplicates/`: the dataset's duplicates and leaks report, and asking for one."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from datasets.doctor.checks import duplicates_state
from datasets.selectors import dataset_for
from datasets.services import duplicates_check
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.core.openapi import bad_request

_PLACE = {"type": "object", "properties": {"split": {"type": "string"}, "index": {"type": "integer"},
                                           "key": {"type": "string"}, "label": {"type": "integer"}}}  # fmt: skip
DUPLICATES_SCHEMA = {
    "type": "object",
    "properties": {
        "state": {"type": "string", "enum": ["not checked", "checking", "done", "failed"]},
        "report": {
            "type": "object",
            "nullable": True,
            "description": "images checked, pairs found (exact and near), leaks (pairs across splits), counts per "
            "pair of splits, the pairs (leaks first, at most 2,000), or `error`",
            "properties": {
                "images": {"type": "integer"},
                "pairs_total": {"type": "integer"},
                "leaks": {"type": "integer"},
                "exact": {"type": "integer"},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "pairs": {"type": "array", "items": {"type": "object", "properties": {
                    "kind": {"type": "string", "enum": ["exact", "near"]}, "bits": {"type": "integer"},
                    "correlation": {"type": "number"}, "a": _PLACE, "b": _PLACE}}},
                "error": {"type": "string"},
            },
        },
    },
}  # fmt: skip


@extend_schema(methods=["GET"], summary="The dataset's duplicates and leaks between splits",
               responses={200: DUPLICATES_SCHEMA})  # fmt: skip
@extend_schema(
    methods=["POST"],
    summary="Check the dataset for duplicates and leaks (again): a worker writes the report",
    request=None,
    responses={202: DUPLICATES_SCHEMA, 400: bad_request("The dataset is not ready")},
)
@api_view(["GET", "POST"])
def dataset_duplicates_api(request, pk: int):
    dataset = dataset_for(request.user, pk)
    if request.method == "POST":
        try:
            duplicates_check(dataset=dataset, by=request.user)
        except RequestError as error:
            raise drf_error(error) from None
        return Response(duplicates_state(dataset), status=status.HTTP_202_ACCEPTED)
    return Response(duplicates_state(dataset))
