"""REST API of label checks: start one, read its folds and suspects, abort, pause or resume its
runs, and accept its suggestions into a new dataset version."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from datasets.api_versions import VERSION_SCHEMA, version_payload
from datasets.selectors import dataset_for, dataset_to_change
from workbench.core import openapi
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.labelchecks import services
from workbench.labelchecks.models import LabelCheck
from workbench.labelchecks.selectors import (
    fold_rows,
    label_check_for,
    label_check_to_change,
    label_checks_visible_to,
    suspects_shown,
)

CHECK_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "dataset": {"type": "integer"}, "version": {"type": "integer"},
        "network": {"type": "string"}, "folds": {"type": "integer"},
        "state": {"type": "string", "enum": [s for s, _ in LabelCheck.State.choices]}, "error": {"type": "string"},
        "images": {"type": "integer"}, "suspects_total": {"type": "integer"},
        "fold_runs": {"type": "array", "items": {"type": "object"}},
        "suspects": {"type": "array", "items": {"type": "object"}, "description": "the most doubtful first "
                     "(at most 100): image {split, index}, given, suggested, self_confidence"},
    },
}  # fmt: skip
CREATE_SCHEMA = {
    "type": "object",
    "required": ["dataset", "network"],
    "properties": {
        "dataset": {"type": "integer"}, "version": {"type": "integer", "description": "default: the latest"},
        "network": {"type": "string"}, "folds": {"type": "integer", "description": "2 to 10, default 5"},
        "gpus": {"type": "string", "description": "per fold run, as for a run (default auto)"},
        "config": {"type": "object", "description": "the fold runs' trainer settings (epochs, batch_size...)"},
    },
}  # fmt: skip


def check_payload(check: LabelCheck) -> dict:
    return {
        "id": check.pk, "dataset": check.dataset_id, "version": check.version.number, "network": check.network,
        "folds": check.folds, "state": check.state, "error": check.error, "images": check.images,
        "suspects_total": check.suspects, "fold_runs": fold_rows(check), "suspects": suspects_shown(check, limit=100),
    }  # fmt: skip


LIST_SCHEMA = {"type": "object", "properties": {"results": {"type": "array", "items": CHECK_SCHEMA}}}


@extend_schema(methods=["GET"], summary="Label checks you may see, newest first (at most 200)",
               responses={200: LIST_SCHEMA})  # fmt: skip
@extend_schema(
    methods=["POST"],
    summary="Check a dataset's labels: K fold runs through the queue, then confident learning",
    request={"application/json": CREATE_SCHEMA},
    responses={201: CHECK_SCHEMA, 400: openapi.bad_request("A field the check or a fold run refuses")},
)
@api_view(["GET", "POST"])
def label_check_list(request):
    if request.method == "GET":
        checks = [services.label_check_refresh(check=c) for c in label_checks_visible_to(request.user)[:200]]
        return Response({"results": [check_payload(check) for check in checks]})
    data = request.data
    try:
        dataset = dataset_for(request.user, _whole(data.get("dataset"), "dataset"))
    except Http404:
        raise drf_error(RequestError("dataset", f"no dataset {data.get('dataset')!r} of yours")) from None
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    try:
        check = services.label_check_start(
            owner=request.user, dataset=dataset, network=str(data.get("network") or ""), config=config,
            folds=data.get("folds"), gpus=data.get("gpus", "auto"), version=data.get("version"),
        )  # fmt: skip
    except RequestError as error:
        raise drf_error(error) from None
    return Response(check_payload(check), status=status.HTTP_201_CREATED)


def _whole(value, field: str) -> int:
    if type(value) is not int or value < 1:
        raise drf_error(RequestError(field, f"{value!r} is not an id (a whole number)"))
    return value


@extend_schema(summary="A label check: its fold runs and, once done, its suspects", responses={200: CHECK_SCHEMA})
@api_view(["GET"])
def label_check_detail(request, pk: int):
    check = services.label_check_refresh(check=label_check_for(request.user, pk))
    return Response(check_payload(check))


def _action(request, pk: int, act) -> Response:
    check = label_check_to_change(request.user, pk)
    try:
        act(check)
    except RequestError as error:
        raise drf_error(error) from None
    check.refresh_from_db()
    return Response(check_payload(check))


@extend_schema(summary="Abort every fold run still going", request=None, responses={200: CHECK_SCHEMA})
@api_view(["POST"])
def label_check_abort(request, pk: int):
    return _action(request, pk, lambda check: services.label_check_abort(check=check, by=request.user))


@extend_schema(summary="Pause every fold run that can be", request=None, responses={200: CHECK_SCHEMA})
@api_view(["POST"])
def label_check_pause(request, pk: int):
    return _action(request, pk, lambda check: services.label_check_pause(check=check, by=request.user))


@extend_schema(summary="Resume its paused fold runs", request=None, responses={200: CHECK_SCHEMA})
@api_view(["POST"])
def label_check_resume(request, pk: int):
    return _action(request, pk, lambda check: services.label_check_pause(check=check, by=request.user, resume=True))


@extend_schema(
    summary="Fix suspects (their suggestion, another class, dropped) into a new version of the checked one",
    request={"application/json": {"type": "object", "properties": {
        "images": {"type": "array", "items": {"type": "array"},
                   "description": "[split, index] pairs whose suggestion is taken; with neither field: every suspect"},
        "decisions": {"type": "array", "items": {"type": "object"}, "description": "instead: [{image: [split, "
                      "index], action: accept | keep | drop | relabel, label (relabel: a class index or name)}]"}}}},
    responses={201: VERSION_SCHEMA, 400: openapi.bad_request("Not a suspect of the check, or no suspects yet")},
)  # fmt: skip
@api_view(["POST"])
def label_check_accept(request, pk: int):
    check = label_check_for(request.user, pk)
    dataset_to_change(request.user, check.dataset_id)  # a version is a change of the dataset
    try:
        version = services.label_check_accept(
            check=check, by=request.user, images=request.data.get("images"), decisions=request.data.get("decisions")
        )
    except RequestError as error:
        raise drf_error(error) from None
    return Response(version_payload(version, runs=0), status=status.HTTP_201_CREATED)
