"""REST API of the weights a run may start from: list, upload (multipart `file`), delete.

A run names them in `config.pretrained` as `upload:<id>` (see docs/formats.md).
"""

from __future__ import annotations

from rest_framework import status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response

from workbench.core.ownership import row_to_change
from workbench.runs.models import Run
from workbench.runs.web.serializers import PretrainedUploadSerializer, PretrainedWeightsSerializer
from workbench.weights.files import WeightsError
from workbench.weights.models import UploadedWeights
from workbench.weights.uploads import weights_upload


def _weights_for(user):
    """One's own uploads and those shared with one through a project: staff may use anyone's by
    id, but their list stays their own and their projects'."""
    return UploadedWeights.objects.owned_by(user) | UploadedWeights.objects.in_projects_of(user)


@api_view(["GET", "POST"])
@parser_classes([MultiPartParser, FormParser])
def pretrained_list(request):
    if request.method == "GET":
        return Response({"results": PretrainedWeightsSerializer(_weights_for(request.user)[:500], many=True).data})
    serializer = PretrainedUploadSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)
    upload = serializer.validated_data["file"]
    try:
        weights = weights_upload(
            owner=request.user,
            name=serializer.validated_data.get("name") or upload.name,
            chunks=upload,
            size=upload.size,
        )
    except WeightsError as error:
        raise ValidationError({"file": [str(error)]}) from None
    return Response(PretrainedWeightsSerializer(weights).data, status=status.HTTP_201_CREATED)


@api_view(["DELETE"])
def pretrained_detail(request, pk: int):
    """Deletes the upload, unless a run that may still (re)start reads it; a project's viewer may
    use it, not delete it (403 naming the role)."""
    weights = row_to_change(UploadedWeights.objects, request.user, pk, noun="uploaded weights")
    users = Run.objects.filter(config__pretrained=weights.reference).exclude(state__in=Run.FINISHED_STATES)
    if users.exists():
        return Response(
            {"detail": f"{weights.reference} is the start of a run that is not finished; delete it once that run ends"},
            status=status.HTTP_409_CONFLICT,
        )
    weights.file.unlink(missing_ok=True)
    weights.delete()
    return Response(status=status.HTTP_204_NO_CONTENT)
