"""REST API of benchmarks: submit and list, one benchmark with its cells, cancel."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from workbench.benchmarks import services
from workbench.benchmarks.selectors import (
    benchmark_for,
    benchmark_payload,
    benchmark_to_change,
    benchmarks_visible_to,
    largest_batch_answer,
    summary,
)
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query


@extend_schema(methods=["GET"], summary="Benchmarks you may see (at most 200), newest first")
@extend_schema(
    methods=["POST"],
    summary="Submit a benchmark: networks x GPU counts x per-GPU batch sizes, queued for its GPUs",
    request=dict,
    responses={201: OpenApiTypes.OBJECT},
)
@api_view(["GET", "POST"])
def benchmark_list(request):
    if request.method == "POST":
        try:
            benchmark = services.benchmark_submit(owner=request.user, request=dict(request.data))
        except RequestError as error:
            raise drf_error(error) from None
        return Response(benchmark_payload(benchmark), status=status.HTTP_201_CREATED)
    benchmarks = filtered_by_query(benchmarks_visible_to(request.user), request.user, request.query_params)
    return Response({"results": [summary(b) for b in benchmarks[:200]]})


@extend_schema(summary="A benchmark: its state, its cells with speed-up and efficiency, its tables")
@api_view(["GET"])
def benchmark_detail(request, pk: int):
    return Response(benchmark_payload(benchmark_for(request.user, pk)))


@extend_schema(
    summary="Cancel a benchmark (the cells measured so far are kept)",
    request=None,
    responses={202: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT},
)
@api_view(["POST"])
def benchmark_cancel(request, pk: int):
    benchmark = benchmark_to_change(request.user, pk)
    if not services.benchmark_cancel(benchmark=benchmark):
        return Response({"detail": f"benchmark {pk} is {benchmark.state}; nothing to cancel"}, status=409)
    benchmark.refresh_from_db()
    return Response(summary(benchmark), status=status.HTTP_202_ACCEPTED)


@extend_schema(
    summary="Find the largest batch for a run: queued as a one-cell benchmark on the run's GPUs",
    description="Body: dataset (id), network, crop_size, precision, gpus (a count), model_parallel. "
    "Poll GET /api/benchmarks/<id>/largest-batch/ for the answer: batch_size is the run's global batch.",
    request=dict,
    responses={201: OpenApiTypes.OBJECT},
)
@api_view(["POST"])
def largest_batch_submit(request):
    try:
        benchmark = services.largest_batch_submit(owner=request.user, request=dict(request.data))
    except RequestError as error:
        raise drf_error(error) from None
    return Response(largest_batch_answer(benchmark), status=status.HTTP_201_CREATED)


@extend_schema(summary="The run form's largest-batch finder: its state, and its answer once done")
@api_view(["GET"])
def largest_batch_detail(request, pk: int):
    return Response(largest_batch_answer(benchmark_for(request.user, pk)))
