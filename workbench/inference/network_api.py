"""REST API of a network's picture: its graph of layers, for a run or for a run not created yet."""

from __future__ import annotations

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from datasets.models import Dataset
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.inference import networks
from workbench.runs.selectors import run_for

_PARAMETERS = [
    OpenApiParameter("network", str, description="a network name, as the run form offers them"),
    OpenApiParameter("dataset", int, description="one of your ready datasets: its channels and image size"),
    OpenApiParameter("crop_size", int, required=False, description="the side of the training crop, if any"),
    OpenApiParameter("custom_layers", str, required=False, description="JSON list of layers (network=custom)"),
]


def _draft_input(params, user) -> networks.NetworkInput:
    ready = Dataset.objects.visible_to(user).filter(status=Dataset.Status.READY)
    try:
        dataset = ready.get(pk=int(params.get("dataset") or ""))
    except (ValueError, Dataset.DoesNotExist):
        raise RequestError("dataset", "choose one of your ready datasets") from None
    crop = params.get("crop_size", "")
    try:
        layers = json.loads(params.get("custom_layers") or "[]")
    except ValueError:
        raise RequestError("custom_layers", "expected a JSON list of layers") from None
    return networks.input_for(
        network=params.get("network") or "",
        dataset=dataset,
        crop_size=int(crop) if crop.isdigit() else None,
        custom_layers=layers if isinstance(layers, list) else None,
    )


@extend_schema(summary="The graph of layers of a network not trained yet", parameters=_PARAMETERS,
               responses=OpenApiTypes.OBJECT)  # fmt: skip
@api_view(["GET"])
def network_graph(request):
    try:
        return Response(networks.graph_of(_draft_input(request.query_params, request.user)))
    except RequestError as error:
        raise drf_error(error) from None


@extend_schema(summary="The graph of layers of a run's network", responses=OpenApiTypes.OBJECT)
@api_view(["GET"])
def run_network(request, pk: int):
    run = run_for(request.user, pk)
    try:
        return Response(networks.graph_of(networks.input_of_run(run)))
    except RequestError as error:
        raise drf_error(error) from None
