"""Websocket routes of every app, mounted by workbench.asgi under the auth and origin checks."""

from django.urls import path

from datasets.consumers import DatasetConsumer
from workbench.benchmarks.consumers import BenchmarkConsumer
from workbench.consumers import DashboardConsumer
from workbench.runs.web.consumers import RunConsumer
from workbench.searches.consumers import SearchConsumer

websocket_urlpatterns = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
    path("ws/runs/<int:pk>/", RunConsumer.as_asgi()),
    path("ws/datasets/<int:pk>/", DatasetConsumer.as_asgi()),
    path("ws/benchmarks/<int:pk>/", BenchmarkConsumer.as_asgi()),
    path("ws/searches/<int:pk>/", SearchConsumer.as_asgi()),
]
