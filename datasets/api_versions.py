"""`/api/datasets/<id>/versions/`: a dataset's versions, making one from fixes (or by dropping the
training split's leaked copies), and deleting one no run uses."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from datasets.models import DatasetVersion
from datasets.selectors import dataset_for, dataset_to_change, version_of, versions_of
from datasets.services import VersionInUse, version_create, version_delete, version_drop_leaks
from datasets.versions import first_version
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.core.openapi import bad_request, error

_FIX = {
    "type": "object",
    "properties": {
        "op": {"type": "string", "enum": ["drop", "relabel", "move"]},
        "split": {"type": "string", "enum": ["train", "val", "test"], "description": "the image's split in the build"},
        "index": {"type": "integer", "description": "the image's index in that split of the build"},
        "label": {"description": "relabel: a class index or name (classification)"},
        "to": {"type": "string", "enum": ["train", "val", "test"], "description": "move: the split it goes to"},
    },
    "required": ["op", "split", "index"],
}
VERSION_SCHEMA = {
    "type": "object",
    "properties": {
        "number": {"type": "integer"},
        "digest": {"type": "string", "description": "of the images and labels it holds (blake2b, 128 bits)"},
        "parent": {"type": "integer", "nullable": True},
        "note": {"type": "string"},
        "splits": {"type": "object", "description": "per split: count (and class_counts for classification)"},
        "fixes": {"type": "array", "items": _FIX, "description": "the fixes made on its parent"},
        "runs": {"type": "integer", "description": "runs trained on it"},
        "created_by": {"type": "string", "nullable": True},
        "created_at": {"type": "string", "format": "date-time"},
    },
}
CREATE_SCHEMA = {
    "type": "object",
    "properties": {
        "fixes": {"type": "array", "items": _FIX},
        "from": {"type": "integer", "description": "the version fixed (default: the latest)"},
        "note": {"type": "string"},
        "drop_leaked_copies": {
            "type": "boolean",
            "description": "instead of fixes: drop the training split's copies of validation and test images "
            "that the duplicates report lists",
        },
    },
}


def version_payload(version: DatasetVersion, *, runs: int | None = None) -> dict:
    return {
        "number": version.number,
        "digest": version.digest,
        "parent": version.parent.number if version.parent_id else None,
        "note": version.note,
        "splits": version.splits,
        "fixes": version.fixes,
        "runs": runs if runs is not None else version.runs.count(),
        "created_by": version.created_by.username if version.created_by_id else None,
        "created_at": version.created_at.isoformat(),
    }


@extend_schema(
    methods=["GET"],
    summary="The dataset's versions, oldest first (version 1 is the build)",
    responses={200: {"type": "object", "properties": {"results": {"type": "array", "items": VERSION_SCHEMA}}}},
)
@extend_schema(
    methods=["POST"],
    summary="A new version: the latest (or `from`) with fixes, or without the training split's leaked copies",
    request={"application/json": CREATE_SCHEMA},
    responses={201: VERSION_SCHEMA, 400: bad_request("A fix that cannot be made, named by its place")},
)
@api_view(["GET", "POST"])
def dataset_versions_api(request, pk: int):
    if request.method == "GET":
        dataset = dataset_for(request.user, pk)
        rows = versions_of(dataset)
        return Response({"results": [version_payload(v, runs=v.run_count) for v in rows]})
    dataset = dataset_to_change(request.user, pk)
    data = request.data if isinstance(request.data, dict) else {}
    try:
        if data.get("drop_leaked_copies") is True:
            version = version_drop_leaks(dataset=dataset, by=request.user)
        else:
            base = _base_version(dataset, data.get("from"))
            note = data.get("note") if isinstance(data.get("note"), str) else ""
            version = version_create(dataset=dataset, by=request.user, fixes=data.get("fixes"), base=base, note=note)
    except RequestError as err:
        raise drf_error(err) from None
    return Response(version_payload(version, runs=0), status=status.HTTP_201_CREATED)


def _base_version(dataset, number) -> DatasetVersion | None:
    if number is None:
        return None
    found = dataset.versions.filter(number=number).first() if type(number) is int else None
    if found is None:
        raise RequestError("from", f"dataset {dataset.pk} has no version {number!r}")
    return found


@extend_schema(methods=["GET"], summary="One version of the dataset", responses={200: VERSION_SCHEMA})
@extend_schema(
    methods=["DELETE"],
    summary="Delete a version no run trained on (not version 1, the build)",
    responses={204: None, 400: bad_request("Version 1 is the build"), 409: error("Runs trained on it")},
)
@api_view(["GET", "DELETE"])
def dataset_version_api(request, pk: int, number: int):
    if request.method == "GET":
        dataset = dataset_for(request.user, pk)
        first_version(dataset)  # version 1 of a dataset built before versions existed
        return Response(version_payload(version_of(dataset, number)))
    dataset = dataset_to_change(request.user, pk)
    version = version_of(dataset, number)
    try:
        version_delete(dataset=dataset, version=version, by=request.user)
    except RequestError as err:
        raise drf_error(err) from None
    except VersionInUse as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    return Response(status=status.HTTP_204_NO_CONTENT)
