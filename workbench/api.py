"""REST endpoints of the platform: who am I, API tokens, workers, and a probe task."""

from __future__ import annotations

import uuid

from celery.result import AsyncResult
from django.db import transaction
from django.http import JsonResponse
from django.views.defaults import page_not_found, server_error
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import api_view
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from workbench import throttle
from workbench.core.openapi import error
from workbench.core.parsers import JSONObjectParser
from workbench.health import workers
from workbench.workers.tasks import probe_devices


@extend_schema(
    summary="Who am I",
    responses=inline_serializer(
        "Me",
        {"id": serializers.IntegerField(), "username": serializers.CharField(), "is_staff": serializers.BooleanField()},
    ),
)
@api_view(["GET"])
def me(request):
    user = request.user
    return Response({"id": user.pk, "username": user.username, "is_staff": user.is_staff})


class ThrottledObtainAuthToken(ObtainAuthToken):
    """POST username and password, get the API token.

    The password check goes through the throttled authentication backend like every login; the
    early lock check here only turns a locked account into a 429 instead of a generic 400.
    """

    # ObtainAuthToken names DRF's plain JSONParser; use the project's, like every other view.
    parser_classes = (JSONObjectParser, FormParser, MultiPartParser)

    @extend_schema(
        summary="Trade a username and password for the API token",
        request=AuthTokenSerializer,
        responses={
            200: inline_serializer("TokenResponse", {"token": serializers.CharField()}),
            429: error("Too many failed sign-in attempts for this account or address: wait and try again."),
        },
    )
    def post(self, request, *args, **kwargs):
        username = str(request.data.get("username", ""))
        if throttle.login_locked(username=username, ip=throttle.client_ip(request)):
            return Response({"detail": throttle.locked_message()}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            return Response(serializer.errors, status=status.HTTP_400_BAD_REQUEST)
        token, _ = Token.objects.get_or_create(user=serializer.validated_data["user"])
        return Response({"token": token.key})


@extend_schema(
    summary="Workers and their devices",
    responses=inline_serializer("Workers", {"workers": serializers.ListField(child=serializers.DictField())}),
)
@api_view(["GET"])
def worker_list(request):
    return Response({"workers": workers()})


@extend_schema(
    summary="Queue a probe of a worker's devices",
    request=None,
    responses={202: inline_serializer("ProbeQueued", {"task_id": serializers.UUIDField()})},
)
@api_view(["POST"])
def probe(request):
    """Queue a probe of the devices on a worker; poll /api/tasks/<id>/ for its answer."""
    task_id = str(uuid.uuid4())
    transaction.on_commit(lambda: probe_devices.apply_async(task_id=task_id))
    return Response({"task_id": task_id}, status=status.HTTP_202_ACCEPTED)


@extend_schema(
    summary="A probe's state and, when done, its answer",
    responses=inline_serializer(
        "ProbeResult",
        {
            "task_id": serializers.UUIDField(),
            "state": serializers.CharField(),
            "result": serializers.JSONField(required=False),
            "error": serializers.CharField(required=False),
        },
    ),
)
@api_view(["GET"])
def probe_result(request, task_id: uuid.UUID):
    result = AsyncResult(str(task_id))
    body = {"task_id": str(task_id), "state": result.state}
    if result.successful():
        body["result"] = result.result
    elif result.failed():
        body["error"] = str(result.result)
    return Response(body)


def not_found(request, exception=None):
    """handler404: a URL under /api/ that matches no route answers JSON like every API error."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    return page_not_found(request, exception)


def internal_error(request):
    """handler500: the API answers JSON; pages get templates/500.html in the workbench's layout."""
    if request.path.startswith("/api/"):
        body = {"detail": "Internal server error; the details are in the server log."}
        return JsonResponse(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return server_error(request)
