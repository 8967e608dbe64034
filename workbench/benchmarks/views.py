"""The benchmark pages: the list with the new-benchmark form, one benchmark (its tables filled
live and its charts), its CSV and markdown, and two benchmarks compared cell by cell."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from trainer.bench import table as bench_table
from workbench.benchmarks import services
from workbench.benchmarks.forms import BenchmarkForm
from workbench.benchmarks.references import REFERENCES, references_for
from workbench.benchmarks.scheduling import queue_position
from workbench.benchmarks.selectors import (
    benchmark_for,
    benchmark_payload,
    benchmark_to_change,
    benchmarks_visible_to,
    cells_of,
    comparable_with,
)
from workbench.core.adapters import add_form_errors
from workbench.core.errors import RequestError
from workbench.projects.selectors import filtered_by_query


@login_required
def benchmark_list(request):
    form = BenchmarkForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            benchmark = services.benchmark_submit(owner=request.user, request=form.request())
        except RequestError as error:
            add_form_errors(form, error)
        else:
            return redirect("benchmark-detail", pk=benchmark.pk)
    benchmarks = filtered_by_query(benchmarks_visible_to(request.user), request.user, request.GET)
    return render(
        request, "benchmarks/list.html", {"form": form, "benchmarks": benchmarks.select_related("project")[:200]}
    )


@login_required
def benchmark_detail(request, pk: int):
    benchmark = benchmark_for(request.user, pk)
    matching = references_for(benchmark.request)
    page = {
        **benchmark_payload(benchmark),
        "socket_path": f"/ws/benchmarks/{benchmark.pk}/",
        "cancel_url": reverse("api-benchmark-cancel", args=[benchmark.pk]),
        # The page puts each under its GPU count in the matching table, as the cells arrive.
        "references": matching,
    }
    context = {
        "benchmark": benchmark,
        "page": page,
        "published": matching,
        "published_networks": sorted({reference["network"] for reference in REFERENCES}),
        "queue": queue_position(benchmark),
        "simulated": benchmark.on_simulated_gpus,
        "others": comparable_with(benchmark, benchmarks_visible_to(request.user)),
    }
    return render(request, "benchmarks/detail.html", context)


def _download(text: str, name: str, content_type: str) -> HttpResponse:
    response = HttpResponse(text, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@login_required
def benchmark_csv(request, pk: int):
    benchmark = benchmark_for(request.user, pk)
    return _download(bench_table.to_csv(cells_of(benchmark)), f"benchmark-{pk}.csv", "text/csv")


@login_required
def benchmark_markdown(request, pk: int):
    benchmark = benchmark_for(request.user, pk)
    text = bench_table.markdown(cells_of(benchmark), title=f"Benchmark #{pk}: {benchmark.name}")
    if benchmark.on_simulated_gpus:
        text += "\nMeasured on simulated GPUs: CPU processes sharing one host's cores, not GPUs.\n"
    published = references_for(benchmark.request)
    if published:
        text += "\nPublished reference numbers (measured elsewhere, not here):\n\n" + "".join(
            f"- {r['network']} {r['image_size']}px {r['setting']}, {r['hardware']}: {r['images_per_sec']:,} images/s "
            f"({r['source']}, {r['url']})\n"
            for r in published
        )
    return _download(text, f"benchmark-{pk}.md", "text/markdown")


@login_required
def benchmark_compare(request, pk: int, other: int):
    left, right = benchmark_for(request.user, pk), benchmark_for(request.user, other)
    pairs = bench_table.compare(bench_table.derive(cells_of(left)), bench_table.derive(cells_of(right)))
    return render(request, "benchmarks/compare.html", {"left": left, "right": right, "pairs": pairs})


@login_required
@require_POST
def benchmark_cancel(request, pk: int):
    services.benchmark_cancel(benchmark=benchmark_to_change(request.user, pk))
    return redirect("benchmark-detail", pk=pk)
