"""REST API of runs, the queue and the GPUs."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from datasets.models import Dataset
from datasets.selectors import datasets_visible_to
from trainer.config import SHORT_FIELDS, shown
from workbench.core import openapi
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.core.ids import parse_id
from workbench.projects.selectors import filtered_by_query
from workbench.runs import services
from workbench.runs.models import Run
from workbench.runs.scheduler import queue_for
from workbench.runs.selectors import run_to_change, runs_visible_to
from workbench.runs.web.serializers import (
    SHORT_NAMES,
    PrioritySerializer,
    RunCreateSerializer,
    RunDetailSerializer,
    RunSerializer,
    SweepCreateSerializer,
)
from workbench.workers.inventory import hosts_for_display


def _as_sent(error: RequestError, sent) -> RequestError:
    """The refusal of a short field sent beside `config` (`batch_size: 0`) keyed by that field, the
    client's own key: trainer_config put it at its path in the config, which named `config`."""
    at = {f"config.{SHORT_FIELDS[name]}": name for name in SHORT_NAMES if name in sent}
    return type(error).of([(at.get(field or "", field), message) for field, message in error.errors])


def _runs_for(user):
    # The serializers list each run's devices: fetched in one query for the whole page.
    return runs_visible_to(user).prefetch_related("devices__host")


def _get_run_for_user(request, pk: int) -> Run:
    """The run, or 404 for both "missing" and "not yours"."""
    return get_object_or_404(_runs_for(request.user), pk=pk)


@extend_schema(
    methods=["GET"],
    summary="Runs you may see (at most 500), newest first",
    parameters=[
        OpenApiParameter("state", str),
        OpenApiParameter("network", str),
        OpenApiParameter("dataset", int),
        OpenApiParameter("owner", str, description="a username (staff only)"),
    ],
    responses=inline_serializer("RunList", {"results": RunSerializer(many=True)}),
)
@extend_schema(
    methods=["POST"],
    summary="Submit a run; it queues for its devices",
    request=RunCreateSerializer,
    responses={201: RunDetailSerializer, 403: openapi.error("Only staff can set a priority.")},
)
@api_view(["GET", "POST"])
def run_list(request):
    if request.method == "POST":
        return _run_create(request)
    runs = filtered_by_query(_runs_for(request.user), request.user, request.query_params)
    for field in ("state", "network"):
        if request.query_params.get(field):
            runs = runs.filter(**{field: request.query_params[field]})
    if request.query_params.get("dataset"):
        dataset_id = parse_id(request.query_params["dataset"])
        if dataset_id is None:
            raise ValidationError({"dataset": ["give a dataset id (a whole number)"]})
        runs = runs.filter(dataset_id=dataset_id)
    if request.query_params.get("owner") and request.user.is_staff:
        runs = runs.filter(owner__username=request.query_params["owner"])
    return Response({"results": RunSerializer(runs[:500], many=True, context={"request": request}).data})


def _submission_dataset(request, data: dict) -> Dataset:
    """The dataset a submission names, if the user may train on it."""
    dataset = datasets_visible_to(request.user).filter(pk=data["dataset"]).first()
    if dataset is None:
        raise ValidationError({"dataset": [f"no dataset {shown(data['dataset'])} of yours"]})
    return dataset


def _run_create(request):
    serializer = RunCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    dataset = _submission_dataset(request, data)
    try:
        run = services.run_submit(
            owner=request.user,
            dataset=dataset,
            name=data["name"],
            network=data["network"],
            config=serializer.trainer_config(),
            gpus=data["gpus"],
            priority=data["priority"],
            executor=data["executor"],
            nodes=data["nodes"],
            project=data["project"] if "project" in data else services.DATASETS_PROJECT,
            dataset_version=data.get("dataset_version"),
        )
    except RequestError as error:
        raise drf_error(_as_sent(error, request.data)) from None
    return Response(RunDetailSerializer(run, context={"request": request}).data, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="Submit a sweep: one run per combination of the values in `sweep`, all of them or none",
    request=SweepCreateSerializer,
    responses={
        201: inline_serializer("Sweep", {"sweep": serializers.CharField(), "results": RunDetailSerializer(many=True)}),
        403: openapi.error("Only staff can set a priority."),
    },
)
@api_view(["POST"])
def sweep_create(request):
    serializer = SweepCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    dataset = _submission_dataset(request, data)
    fields = {key: data[key] for key in ("name", "network", "gpus", "priority", "executor", "nodes")}
    try:
        runs = services.sweep_create(
            owner=request.user,
            dataset=dataset,
            base_request={**fields, "config": serializer.trainer_config()},
            grid=data["sweep"],
        )
    except RequestError as error:
        raise drf_error(_as_sent(error, request.data)) from None
    body = {"sweep": runs[0].sweep, "results": RunDetailSerializer(runs, many=True, context={"request": request}).data}
    return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(methods=["GET"], summary="A run", responses=RunDetailSerializer)
@extend_schema(
    methods=["PATCH"],
    summary="Change a run's priority (staff only)",
    request=PrioritySerializer,
    responses=RunDetailSerializer,
)
@extend_schema(
    methods=["DELETE"],
    summary="Delete a finished run and its files",
    responses={204: None, 409: openapi.error("The run is still active.")},
)
@api_view(["GET", "PATCH", "DELETE"])
def run_detail(request, pk: int):
    run = _get_run_for_user(request, pk) if request.method == "GET" else run_to_change(request.user, pk)
    if request.method == "DELETE":
        try:
            services.run_delete(run=run)
        except services.RunError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)
    if request.method == "PATCH":
        if not request.user.is_staff:
            raise PermissionDenied("only staff can change a run's priority")
        serializer = PrioritySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        Run.objects.filter(pk=run.pk).update(priority=serializer.validated_data["priority"])
        services.queue_scheduling()
        run.refresh_from_db()
    return Response(RunDetailSerializer(run, context={"request": request}).data)


def _action(request, pk: int, action) -> Response:
    run = run_to_change(request.user, pk)
    try:
        run = action(run=run)
    except services.RunError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    return Response(RunDetailSerializer(run, context={"request": request}).data)


@extend_schema(
    summary="Abort a run",
    request=None,
    responses={200: RunDetailSerializer, 409: openapi.error("Not possible in the run's state.")},
)
@api_view(["POST"])
def run_abort(request, pk: int):
    return _action(request, pk, services.run_abort)


@extend_schema(
    summary="Pause a run (stops with a checkpoint)",
    request=None,
    responses={200: RunDetailSerializer, 409: openapi.error("Not possible in the run's state.")},
)
@api_view(["POST"])
def run_pause(request, pk: int):
    return _action(request, pk, services.run_pause)


@extend_schema(
    summary="Resume a paused or stopped run",
    request=None,
    responses={200: RunDetailSerializer, 409: openapi.error("Not possible in the run's state.")},
)
@api_view(["POST"])
def run_resume(request, pk: int):
    return _action(request, pk, services.run_resume)


@extend_schema(
    summary="The one queue: runs and benchmarks waiting for devices, and what runs now until when",
    description=(
        "`queue`: waiting jobs in the order they will be considered (runs on Slurm last, position null); "
        "`running`: jobs holding devices now, where, and their expected end. Other users' jobs are anonymous."
    ),
    responses=inline_serializer(
        "Queue",
        {
            "queue": serializers.ListField(child=serializers.DictField()),
            "running": serializers.ListField(child=serializers.DictField()),
        },
    ),
)
@api_view(["GET"])
def queue(request):
    picture = queue_for(request.user)
    return Response({"queue": picture["waiting"], "running": picture["running"]})


@extend_schema(
    summary="Hosts and their devices, with who uses them",
    responses=inline_serializer("Hosts", {"hosts": serializers.ListField(child=serializers.DictField())}),
)
@api_view(["GET"])
def gpus(request):
    return Response({"hosts": hosts_for_display(request.user)})
