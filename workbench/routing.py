"""Websocket routes of every app, mounted by workbench.asgi under the auth and origin checks."""

from django.urls import path

from workbench.consumers import DashboardConsumer

websocket_urlpatterns = [
    path("ws/dashboard/", DashboardConsumer.as_asgi()),
]
