from django.urls import path

from workbench.benchmarks import api

urlpatterns = [
    path("benchmarks/", api.benchmark_list, name="api-benchmarks"),
    path("benchmarks/<int:pk>/", api.benchmark_detail, name="api-benchmark"),
    path("benchmarks/largest-batch/", api.largest_batch_submit, name="api-largest-batch"),
    path("benchmarks/<int:pk>/largest-batch/", api.largest_batch_detail, name="api-largest-batch-detail"),
    path("benchmarks/<int:pk>/cancel/", api.benchmark_cancel, name="api-benchmark-cancel"),
]
