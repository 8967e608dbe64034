"""REST API of searches: create one, read its trials and best, pause, resume, abort, train the best."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from datasets.selectors import datasets_visible_to
from trainer.config import shown
from workbench.core import openapi
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query
from workbench.runs.web.serializers import RunDetailSerializer
from workbench.searches import services
from workbench.searches.selectors import search_for, search_to_change, searches_visible_to
from workbench.searches.serializers import SearchCreateSerializer, SearchDetailSerializer, SearchSerializer


@extend_schema(
    methods=["GET"],
    summary="Searches you may see (at most 200), newest first",
    responses=inline_serializer("SearchList", {"results": SearchSerializer(many=True)}),
)
@extend_schema(
    methods=["POST"],
    summary="Start a search: trials of a run's request over a space, each queued as a run",
    request=SearchCreateSerializer,
    responses={201: SearchDetailSerializer, 403: openapi.error("Only staff can set a priority.")},
)
@api_view(["GET", "POST"])
def search_list(request):
    if request.method == "GET":
        searches = filtered_by_query(searches_visible_to(request.user), request.user, request.query_params)[:200]
        return Response({"results": SearchSerializer(searches, many=True).data})
    serializer = SearchCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    dataset = datasets_visible_to(request.user).filter(pk=data["dataset"]).first()
    if dataset is None:
        raise ValidationError({"dataset": [f"no dataset {shown(data['dataset'])} of yours"]})
    try:
        search = services.search_create(
            owner=request.user, dataset=dataset, name=data["name"], network=data["network"],
            config=serializer.trainer_config(), space=data["space"], gpus=data["gpus"], priority=data["priority"],
            executor=data["executor"], nodes=data["nodes"], objective=data["objective"],
            direction=data.get("direction"), sampler=data["sampler"], pruner=data["pruner"], trials=data["trials"],
            parallel=data["parallel"], gpu_hours=data["gpu_hours"], seed=data["seed"],
        )  # fmt: skip
    except RequestError as error:
        raise drf_error(error) from None
    return Response(SearchDetailSerializer(search, context={"request": request}).data, status=status.HTTP_201_CREATED)


@extend_schema(
    summary="A search: its trials (state, parameters, objective, rung), the best, the budget in words",
    responses=SearchDetailSerializer,
)
@api_view(["GET"])
def search_detail(request, pk: int):
    return Response(SearchDetailSerializer(search_for(request.user, pk), context={"request": request}).data)


def _action(request, pk: int, action) -> Response:
    search = search_to_change(request.user, pk)
    try:
        search = action(search=search)
    except services.SearchError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    return Response(SearchDetailSerializer(search, context={"request": request}).data)


_STATE_CONFLICT = {200: SearchDetailSerializer, 409: openapi.error("Not possible in the search's state.")}


@extend_schema(summary="Pause a search: no new trial starts, its running trials pause", request=None,
               responses=_STATE_CONFLICT)  # fmt: skip
@api_view(["POST"])
def search_pause(request, pk: int):
    return _action(request, pk, services.search_pause)


@extend_schema(summary="Resume a paused search and its paused trials", request=None, responses=_STATE_CONFLICT)
@api_view(["POST"])
def search_resume(request, pk: int):
    return _action(request, pk, services.search_resume)


@extend_schema(summary="Abort a search and its trials' runs", request=None, responses=_STATE_CONFLICT)
@api_view(["POST"])
def search_abort(request, pk: int):
    return _action(request, pk, services.search_abort)


@extend_schema(
    summary="Train the best: a full run of the best complete trial's parameters",
    description=(
        "Idempotent: the same request (this search's best trial, the same epochs) while the run it queued is "
        "queued, running or paused answers that run (200) instead of queuing another (201)."
    ),
    request=inline_serializer(
        "TrainBest", {"epochs": serializers.FloatField(required=False, help_text="default: the search's epochs")}
    ),
    responses={201: RunDetailSerializer, 200: RunDetailSerializer, 409: openapi.error("No trial has completed yet.")},
)
@api_view(["POST"])
def search_train_best(request, pk: int):
    search = search_to_change(request.user, pk)
    epochs = request.data.get("epochs") if isinstance(request.data, dict) else None
    try:
        run, queued = services.search_train_best(search=search, epochs=epochs)
    except services.SearchError as error:
        return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
    except RequestError as error:
        raise drf_error(error) from None
    answer = status.HTTP_201_CREATED if queued else status.HTTP_200_OK
    return Response(RunDetailSerializer(run, context={"request": request}).data, status=answer)
