"""REST API of notices: one's settings (read, change) and one's notices with their deliveries."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.notices import services
from workbench.notices.models import KINDS, Notice, NoticeSettings


def settings_json(chosen: NoticeSettings) -> dict:
    """The settings as the page and the API show them: the secret is never read back, only whether one is set."""
    return {
        "kinds": chosen.kinds,
        "kinds_available": KINDS,
        "email_enabled": chosen.email_enabled,
        "email": chosen.email,
        "email_to": chosen.address(),
        "email_available": services.email_available(),
        "webhook_url": chosen.webhook_url,
        "webhook_signed": bool(chosen.webhook_secret),
        "apprise_url": chosen.apprise_url,
        "stall_minutes": chosen.stall_minutes,
        "idle_minutes": chosen.idle_minutes,
    }


def notice_json(notice: Notice) -> dict:
    return {
        "id": notice.pk,
        "kind": notice.kind,
        "subject": notice.subject,
        "text": notice.body,
        "at": notice.created_at.isoformat(),
        "deliveries": [
            {"channel": d.channel, "state": d.state, "attempts": d.attempts, "error": d.error}
            for d in notice.deliveries.all()
        ],
    }


@extend_schema(methods=["GET"], summary="Your notice settings: which events, by email, webhook or chat service")
@extend_schema(
    methods=["PUT"],
    summary="Change your notice settings (any of the fields; webhook_secret is written, never read back)",
    request=OpenApiTypes.OBJECT,
    responses={200: OpenApiTypes.OBJECT},
)
@api_view(["GET", "PUT"])
def notice_settings(request):
    if request.method == "PUT":
        data = request.data if isinstance(request.data, dict) else {}
        try:
            return Response(settings_json(services.settings_update(by=request.user, data=dict(data))))
        except RequestError as exc:
            raise drf_error(exc) from None
    return Response(settings_json(services.settings_for(request.user)))


@extend_schema(summary="Your latest notices (100), each with its deliveries' states")
@api_view(["GET"])
def notice_list(request):
    notices = Notice.objects.filter(user=request.user).prefetch_related("deliveries")[:100]
    return Response({"results": [notice_json(notice) for notice in notices]})
