from django.urls import path

from workbench.benchmarks import api

urlpatterns = [
    path("benchmarks/", api.benchmark_list, name="api-benchmarks"),
    path("benchmarks/<int:pk>/", api.benchmark_detail, name="api-benchmark"),
    path("benchmarks/<int:pk>/cancel/", api.benchmark_cancel, name="api-benchmark-cancel"),
]
