"""REST endpoints for datasets: list, create (from an upload or a server path), detail, delete,
cancel, archive upload and gallery pages. Mounted at /api/datasets/."""

from __future__ import annotations

from django.db import transaction
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import APIException
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from datasets.archives import ArchiveError
from datasets.forms import DEFAULTS, DatasetForm
from datasets.gallery import gallery_item, gallery_page
from datasets.labels import LabelError
from datasets.labels.registry import reads_label_files
from datasets.models import Dataset
from datasets.selectors import dataset_for, dataset_labels, dataset_runs_for, dataset_to_change, datasets_visible_to
from datasets.services import (
    OPTION_FIELDS,
    DatasetInUse,
    dataset_cancel,
    dataset_create,
    dataset_delete,
    dataset_rebuild,
)
from datasets.uploads import (
    CHUNK_BYTES,
    UploadError,
    capped_handlers,
    request_too_large,
    too_large_message,
    upload_append,
    upload_delete,
    upload_save,
    upload_start,
    upload_status,
)
from datasets.validators import upload_request
from trainer.protocol import TASKS
from workbench.core.openapi import bad_request, error, form_schema
from workbench.core.parsers import JSONObjectParser
from workbench.projects.selectors import filtered_by_query


class UploadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "upload_too_large"

    def __init__(self):
        super().__init__(too_large_message())


class CappedMultiPartParser(MultiPartParser):
    """Multipart parsing that streams files to disk and stops at MAX_UPLOAD_BYTES."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = parser_context["request"]
        django_request = request._request
        if request_too_large(django_request):
            raise UploadTooLarge()
        handlers = capped_handlers(django_request)
        django_request.upload_handlers = handlers
        request.upload_handlers = handlers  # DRF reads them through its own Request
        result = super().parse(stream, media_type, parser_context)
        if any(h.too_large for h in handlers):
            raise UploadTooLarge()
        return result


def dataset_json(dataset: Dataset, request=None) -> dict:
    body = {
        "id": dataset.pk,
        "name": dataset.name,
        "owner": dataset.owner.username,
        "project": dataset.project.slug if dataset.project_id else None,
        "kind": dataset.kind,
        "task": dataset.task,
        "status": dataset.status,
        "error": dataset.error,
        "progress": {
            "done": dataset.progress_done,
            "total": dataset.progress_total,
            "percent": round(dataset.progress_percent, 2),
            "images_per_second": round(dataset.images_per_second, 2),
            "eta_seconds": None if dataset.eta_seconds is None else round(dataset.eta_seconds, 1),
        },
        # The build options, named as dataset_create takes them (one list: OPTION_FIELDS).
        "options": {field: getattr(dataset, field) for field in OPTION_FIELDS},
        "labels": dataset.labels,
        "splits": dataset.splits,
        "image_count": dataset.image_count,
        "skipped_count": dataset.skipped_count,
        "size_bytes": dataset.size_bytes,
        "created_at": dataset.created_at.isoformat(),
        "started_at": dataset.started_at.isoformat() if dataset.started_at else None,
        "finished_at": dataset.finished_at.isoformat() if dataset.finished_at else None,
        "path": str(dataset.path) if dataset.status == Dataset.Status.READY else None,
    }
    if reads_label_files(dataset.task):  # the label source's options, as POST takes them
        source = dataset.source or {}
        body["label_options"] = {key: source.get(key) for key in ("format", "class_map", "min_box_size")}
        body["labels_url"] = reverse("api-dataset-labels", args=[dataset.pk])
    url = reverse("dataset-detail", args=[dataset.pk])
    body["url"] = request.build_absolute_uri(url) if request is not None else url
    return body


def _form_errors(form) -> dict:
    return {field: [str(e) for e in errors] for field, errors in form.errors.items()}


# What the API answers, for the OpenAPI schema (/api/schema/).
_NUMBER_OR_NULL = {"type": "number", "nullable": True}
DATASET_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "owner": {"type": "string"},
        "kind": {"type": "string"},
        "task": {"enum": list(TASKS)},
        "label_options": {"type": "object", "description": "detection, segmentation: format, class_map, min_box_size"},
        "labels_url": {"type": "string", "description": "detection, segmentation: the label check and statistics"},
        "status": {"enum": list(Dataset.Status.values)},
        "error": {"type": "string"},
        "progress": {"type": "object"},
        "options": {"type": "object"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "splits": {"type": "object"},
        "image_count": {"type": "integer"},
        "skipped_count": {"type": "integer"},
        "size_bytes": {"type": "integer"},
        "created_at": {"type": "string", "format": "date-time"},
        "started_at": {"type": "string", "format": "date-time", "nullable": True},
        "finished_at": {"type": "string", "format": "date-time", "nullable": True},
        "path": {"type": "string", "nullable": True},
        "url": {"type": "string"},
    },
    "required": ["id", "name", "status", "url"],
}
DATASET_PAGE_SCHEMA = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "next": {"type": "string", "nullable": True},
        "previous": {"type": "string", "nullable": True},
        "results": {"type": "array", "items": DATASET_SCHEMA},
    },
    "required": ["count", "results"],
}
DATASET_FIELDS = form_schema(DatasetForm, defaults=DEFAULTS)
DATASET_MULTIPART = {
    **DATASET_FIELDS,
    "properties": {
        **DATASET_FIELDS["properties"],
        "archive": {"type": "string", "format": "binary", "description": "the archive itself (instead of `upload`)"},
    },
}
UPLOAD_SCHEMA = {
    "type": "object",
    "properties": {
        "upload": {"type": "string", "description": "the token to name in `upload` when creating a dataset"},
        "filename": {"type": "string"},
        "size": {"type": "integer"},
        "received": {"type": "integer"},
        "complete": {"type": "boolean"},
        "chunk_bytes": {"type": "integer"},
    },
    "required": ["upload", "size", "complete"],
}
UPLOAD_ERROR_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string"}, "received": {"type": "integer"}},
    "required": ["detail"],
}
GALLERY_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "object"}},
        "page": {"type": "integer"},
        "pages": {"type": "integer"},
        "total": {"type": "integer"},
    },
    "required": ["items", "page", "pages", "total"],
}
IN_USE_SCHEMA = {
    "type": "object",
    "properties": {"detail": {"type": "string"}, "runs": {"type": "array", "items": {"type": "object"}}},
    "required": ["detail"],
}
TOO_LARGE = error("Over the upload size limit (WORKBENCH_MAX_UPLOAD_BYTES).")


@extend_schema(methods=["GET"], summary="Datasets you may see, newest first", responses={200: DATASET_PAGE_SCHEMA})
@extend_schema(
    methods=["POST"],
    summary="Create a dataset from an upload (token or the archive itself) or a path on the server",
    request={
        "application/json": DATASET_FIELDS,
        "multipart/form-data": DATASET_MULTIPART,
        "application/x-www-form-urlencoded": DATASET_FIELDS,
    },
    responses={
        201: DATASET_SCHEMA,
        400: bad_request("Per-field messages under `errors`, or `detail` for a body that is not an object"),
        413: TOO_LARGE,
    },
)
@api_view(["GET", "POST"])
@parser_classes([JSONObjectParser, CappedMultiPartParser, FormParser])
def dataset_collection(request):
    if request.method == "GET":
        datasets = filtered_by_query(datasets_visible_to(request.user), request.user, request.query_params)
        paginator = PageNumberPagination()
        page = paginator.paginate_queryset(datasets, request)
        return paginator.get_paginated_response([dataset_json(d, request) for d in page])

    data = {key: request.data.get(key) for key in request.data if key != "archive"}
    archive = request.FILES.get("archive")
    if archive is not None:
        token, _ = upload_save(user_id=request.user.pk, uploaded_file=archive)
        data["upload"] = token
    form = DatasetForm(data, user=request.user)
    if not form.is_valid():
        if archive is not None:  # nothing will use this upload: do not keep it
            upload_delete(user_id=request.user.pk, token=data["upload"])
        return Response({"errors": _form_errors(form)}, status=status.HTTP_400_BAD_REQUEST)
    with transaction.atomic():
        dataset = dataset_create(
            owner=request.user,
            name=form.cleaned_data["name"],
            kind=form.cleaned_data["kind"],
            source=form.source(),
            options=form.options(),
        )
    return Response(dataset_json(dataset, request), status=status.HTTP_201_CREATED)


@extend_schema(methods=["GET"], summary="A dataset", responses={200: DATASET_SCHEMA})
@extend_schema(
    methods=["DELETE"],
    summary="Delete a dataset and its files",
    responses={
        204: None,
        409: OpenApiResponse(response=IN_USE_SCHEMA, description="Runs use it: the runs are listed"),
    },
)
@api_view(["GET", "DELETE"])
def dataset_item(request, pk: int):
    dataset = dataset_for(request.user, pk) if request.method == "GET" else dataset_to_change(request.user, pk)
    if request.method == "GET":
        return Response(dataset_json(dataset, request))
    try:
        dataset_delete(dataset=dataset)
    except DatasetInUse as exc:
        runs = dataset_runs_for(dataset, request.user)
        return Response({"detail": str(exc), "runs": runs}, status=status.HTTP_409_CONFLICT)
    return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(
    summary="Cancel a pending or building dataset",
    request=None,
    responses={200: DATASET_SCHEMA, 409: error("The dataset is not pending or building.")},
)
@api_view(["POST"])
def dataset_cancel_api(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    if not dataset_cancel(dataset=dataset):
        return Response(
            {"detail": f"Only a pending or building dataset can be cancelled; this one is {dataset.status}."},
            status=status.HTTP_409_CONFLICT,
        )
    dataset.refresh_from_db()
    return Response(dataset_json(dataset, request))


@extend_schema(
    summary="Build a failed or cancelled dataset again",
    request=None,
    responses={202: DATASET_SCHEMA, 409: error("The dataset is not failed or cancelled.")},
)
@api_view(["POST"])
def dataset_rebuild_api(request, pk: int):
    dataset = dataset_to_change(request.user, pk)
    with transaction.atomic():
        rebuilt = dataset_rebuild(dataset=dataset)
    if not rebuilt:
        return Response(
            {"detail": f"Only a failed or cancelled dataset can be rebuilt; this one is {dataset.status}."},
            status=status.HTTP_409_CONFLICT,
        )
    dataset.refresh_from_db()
    return Response(dataset_json(dataset, request), status=status.HTTP_202_ACCEPTED)


@extend_schema(
    summary="A page of a split's images, optionally of one class",
    parameters=[
        OpenApiParameter("split", str, enum=["train", "val", "test"], default="train"),
        OpenApiParameter("label", int, description="the class index"),
        OpenApiParameter("page", int, default=1),
        OpenApiParameter("item", int, description="an item's index: that image alone, at its stored size"),
    ],
    responses={200: GALLERY_SCHEMA, 400: error("A split, label or page that is not valid.")},
)
@api_view(["GET"])
def dataset_gallery_api(request, pk: int):
    dataset = dataset_for(request.user, pk)
    split = request.query_params.get("split", "train")
    if split not in ("train", "val", "test"):
        return Response({"detail": "split must be train, val or test"}, status=status.HTTP_400_BAD_REQUEST)
    try:
        label = int(request.query_params["label"]) if request.query_params.get("label", "") != "" else None
        page = int(request.query_params.get("page", 1))
        item = int(request.query_params["item"]) if request.query_params.get("item", "") != "" else None
    except ValueError:
        return Response({"detail": "label, page and item must be integers"}, status=status.HTTP_400_BAD_REQUEST)
    if dataset.status != Dataset.Status.READY:
        return Response({"items": [], "page": 1, "pages": 0, "total": 0})
    if item is not None:  # what a thumbnail opens to
        found = gallery_item(dataset.path, split, item)
        return Response(found) if found else Response({"detail": "no such image"}, status=status.HTTP_404_NOT_FOUND)
    return Response(gallery_page(dataset.path, split, label=label, page=page))


@extend_schema(
    summary="Upload an archive whole (multipart) or open a chunked upload (JSON)",
    request={
        "multipart/form-data": {
            "type": "object",
            "properties": {"archive": {"type": "string", "format": "binary"}},
            "required": ["archive"],
        },
        "application/json": {
            "type": "object",
            "properties": {
                "filename": {"type": "string"},
                "size": {"type": "integer", "minimum": 1, "description": "the archive's size in bytes"},
            },
            "required": ["size"],
        },
    },
    responses={
        201: UPLOAD_SCHEMA,
        400: bad_request("No archive or no size (under `errors`), or a body that is not an object"),
        413: TOO_LARGE,
    },
)
@api_view(["POST"])
@parser_classes([CappedMultiPartParser, JSONObjectParser])
def upload_create(request):
    """Upload an archive.

    - multipart with the file as field `archive`: the whole file in one request (small files,
      scripts); answers {"upload": token, ...};
    - JSON {"filename", "size"}: opens a chunked upload (what the browser does for every file), to
      be sent with PUT /api/datasets/uploads/<token>/ in chunks of at most `chunk_bytes`.
    """
    if request.content_type.startswith("application/json"):
        checked = upload_request(request.data)
        if isinstance(checked, dict):
            return Response({"errors": checked}, status=status.HTTP_400_BAD_REQUEST)
        filename, size = checked
        try:
            token = upload_start(user_id=request.user.pk, filename=filename, size=size)
        except UploadError as exc:
            return Response({"detail": str(exc)}, status=exc.status)
        body = upload_status(user_id=request.user.pk, token=token)
        return Response({**body, "chunk_bytes": CHUNK_BYTES}, status=status.HTTP_201_CREATED)
    archive = request.FILES.get("archive")
    if archive is None:
        return Response(
            {"errors": {"archive": ["Attach the archive as the multipart field 'archive'."]}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    token, path = upload_save(user_id=request.user.pk, uploaded_file=archive)
    return Response(
        {"upload": token, "filename": path.name, "size": path.stat().st_size, "complete": True},
        status=status.HTTP_201_CREATED,
    )


@extend_schema(methods=["GET"], summary="How much of an upload arrived (to resume it)", responses={200: UPLOAD_SCHEMA})
@extend_schema(
    methods=["PUT"],
    summary="Send the next chunk of a chunked upload (raw bytes)",
    request={"application/octet-stream": OpenApiTypes.BINARY},
    parameters=[
        OpenApiParameter("Upload-Offset", int, OpenApiParameter.HEADER, required=True, description="where it starts")
    ],
    responses={
        200: UPLOAD_SCHEMA,
        400: OpenApiResponse(response=UPLOAD_ERROR_SCHEMA, description="A missing or wrong offset"),
        409: OpenApiResponse(response=UPLOAD_ERROR_SCHEMA, description="Wrong offset or already complete"),
        413: OpenApiResponse(response=UPLOAD_ERROR_SCHEMA, description="A chunk too big or past the size"),
    },
)
@extend_schema(methods=["DELETE"], summary="Drop an upload", responses={204: None})
@api_view(["GET", "PUT", "DELETE"])
def upload_chunk(request, token: str):
    """GET: how much arrived (to resume); PUT: the next chunk (raw body, header Upload-Offset)."""
    user_id = request.user.pk
    if request.method == "GET":
        state = upload_status(user_id=user_id, token=token)
        return Response(state) if state else Response({"detail": "No such upload."}, status=404)
    if request.method == "DELETE":
        if upload_status(user_id=user_id, token=token) is None:
            return Response({"detail": "No such upload."}, status=404)
        upload_delete(user_id=user_id, token=token)
        return Response(status=status.HTTP_204_NO_CONTENT)
    try:
        offset = int(request.headers.get("Upload-Offset", ""))
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return Response({"detail": "Send the chunk's offset in the Upload-Offset header."}, status=400)
    try:
        state = upload_append(user_id=user_id, token=token, offset=offset, stream=request._request, length=length)
    except UploadError as exc:
        body = {"detail": str(exc)}
        if exc.received is not None:
            body["received"] = exc.received
        return Response(body, status=exc.status)
    return Response(state)


LABEL_CHECK_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"enum": list(TASKS)},
        "format": {"type": "string"},
        "count_means": {"type": "string", "description": "instances (detection) or images containing the class"},
        "count_unit": {"type": "string", "description": "what one count is: objects (detection) or images"},
        "images": {"type": "integer"},
        "images_without_labels": {"type": "integer"},
        "classes": {"type": "array", "items": {"type": "object"}, "description": "{name, count, maps_to}"},
        "labels": {"type": "array", "items": {"type": "object"}, "description": "the dataset's classes {name, count}"},
        "empty_classes": {
            "type": "array",
            "items": {"type": "string"},
            "description": "the dataset's classes no image holds (each still an output of the network)",
        },
        "report": {"type": "object", "description": "{counts, meaning, problems: [{file, line, kind, message}]}"},
        "min_box_size": {"type": "number"},
        "own_split": {
            "type": ["object", "null"],
            "description": "the source's own split lists (VOC's ImageSets), used instead of the percentages: "
            "{lists: [path], counts: {split: images}}; null where the source has none",
        },
    },
}


@extend_schema(
    summary="Check a detection or segmentation source before building: classes, counts, class table, problems",
    request={"application/json": DATASET_FIELDS},
    responses={200: LABEL_CHECK_SCHEMA, 400: bad_request("Per-field messages under `errors`")},
)
@api_view(["POST"])
@parser_classes([JSONObjectParser, FormParser])
def dataset_label_check_api(request):
    data = {key: request.data.get(key) for key in request.data}
    data.setdefault("name", "label check")  # the name is not checked here
    form = DatasetForm(data, user=request.user)
    if not form.is_valid():
        return Response({"errors": _form_errors(form)}, status=status.HTTP_400_BAD_REQUEST)
    if not reads_label_files(form.cleaned_data["task"]):
        return Response(
            {"errors": {"task": ["a classifier has no labels to check: give the task"]}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    try:
        return Response(form.label_check())
    except (LabelError, ArchiveError) as exc:
        return Response({"errors": {"format": [str(exc)]}}, status=status.HTTP_400_BAD_REQUEST)


@extend_schema(
    summary="A detection or segmentation dataset's label check and statistics, as its build stored them",
    responses={
        200: {
            "type": "object",
            "properties": {
                "task": {"enum": list(TASKS)},
                "check": {**LABEL_CHECK_SCHEMA, "nullable": True},
                "stats": {"type": "object", "nullable": True},
            },
        }
    },
)
@api_view(["GET"])
def dataset_labels_api(request, pk: int):
    return Response(dataset_labels(dataset_for(request.user, pk)))
