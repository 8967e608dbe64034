"""REST API of inference: classify an image, start classify-many and test jobs, follow them,
look inside the network, download exports."""

from __future__ import annotations

from django.http import FileResponse, Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from datasets.images import ImageRefused
from workbench.core import openapi
from workbench.core.adapters import drf_error
from workbench.core.errors import RequestError
from workbench.core.parsers import JSONObjectParser
from workbench.core.task_table import task_row
from workbench.inference import activations, engine, exports, renderers, services, validators
from workbench.inference.models import InferenceJob
from workbench.inference.selectors import job_for, jobs_visible_to
from workbench.runs.selectors import run_for

# One image is decoded in the request; anything bigger belongs in a classify-many job.
MAX_IMAGE_BYTES = 64 * 1024 * 1024


def job_json(job: InferenceJob, request=None) -> dict:
    body = {
        "id": job.pk,
        "run": job.run_id,
        "kind": job.kind,
        "state": job.state,
        "checkpoint": job.checkpoint,
        "source": job.source,
        "input_name": job.input_name,
        "progress": {"done": job.progress_done, "total": job.progress_total, "percent": round(job.progress_percent, 1)},
        "error": job.error,
        "result": job.result if job.state == InferenceJob.State.DONE else None,
        "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "page": reverse("inference-job", args=[job.run_id, job.pk]),
    }
    if job.kind != InferenceJob.Kind.TEST:
        body["csv"] = reverse("api-inference-job-csv", args=[job.pk])
        body["rows"] = reverse("api-inference-job-rows", args=[job.pk])
    return body


def _checkpoint_predictor(run, which: str, action: str = "classify"):
    """The run's checkpoint and its predictor, if the run's task does `action` (400 naming the
    action it does otherwise: a detector's run does not classify)."""
    try:
        path = services.checkpoint_path(run=run, which=which)
    except services.InferenceError as error:
        raise drf_error(error) from None
    try:
        return path, engine.predictor_of(path, action)
    except engine.InferenceInputError as error:
        raise ValidationError({"run": [f"run #{run.pk}: {error.message}"]}) from None


def _checkpoint_classifier(run, which: str):
    return _checkpoint_predictor(run, which, "classify")


def _min_score(request) -> float:
    try:
        return validators.check_min_score(request.data.get("min_score"))
    except RequestError as error:
        raise drf_error(error) from None


def _open_upload(request, field: str = "image"):
    upload = request.FILES.get(field)
    if upload is None:
        raise ValidationError({field: ["upload an image file"]})
    if upload.size > MAX_IMAGE_BYTES:
        raise ValidationError(
            {
                field: [
                    f"{upload.name} is {upload.size} bytes, over the {MAX_IMAGE_BYTES} limit "
                    "for one image; classify big sets as a background job"
                ]
            }
        )
    try:
        return upload.name, engine.open_image(upload.read())
    except ImageRefused as error:
        raise ValidationError({field: [f"{upload.name}: {error}"]}) from None


def _top_k(request) -> int:
    try:
        return validators.check_top_k(request.data.get("top_k"))
    except RequestError as error:
        raise drf_error(error) from None


UPLOAD_SCHEMA = {
    "multipart/form-data": inline_serializer(
        "ClassifyRequest",
        {
            "image": serializers.ImageField(),
            "checkpoint": serializers.CharField(required=False, default="best"),
            "top_k": serializers.IntegerField(required=False, default=5),
        },
    ),
}


@extend_schema(
    summary="Classify one image (top-k classes with probabilities)",
    request=UPLOAD_SCHEMA,
    responses=inline_serializer(
        "ClassifyResponse",
        {
            "run": serializers.IntegerField(),
            "checkpoint": serializers.CharField(),
            "predictions": serializers.ListField(child=serializers.DictField()),
            "preprocessed": serializers.CharField(help_text="PNG data URL of the image as the network saw it"),
        },
    ),
)
@api_view(["POST"])
@parser_classes([MultiPartParser, FormParser])
def classify(request, pk: int):
    run = run_for(request.user, pk)
    top_k = _top_k(request)
    name, image = _open_upload(request)
    path, classifier = _checkpoint_classifier(run, request.data.get("checkpoint", "best"))
    return Response(
        {
            "run": run.pk,
            "checkpoint": path.name,
            "image": name,
            "predictions": engine.classify_one(classifier, image, top_k),
            "preprocessed": engine.png_data_url(engine.as_seen(classifier, image)),
            "preprocessing": classifier.preprocessing,
        }
    )


@extend_schema(
    summary="Detect objects in one image (boxes with class and score, in the image's own pixels)",
    request={
        "multipart/form-data": inline_serializer(
            "DetectRequest",
            {
                "image": serializers.ImageField(),
                "checkpoint": serializers.CharField(required=False, default="best"),
                "min_score": serializers.FloatField(required=False, default=0.05),
            },
        )
    },
    responses=inline_serializer(
        "DetectResponse",
        {
            "run": serializers.IntegerField(),
            "checkpoint": serializers.CharField(),
            "width": serializers.IntegerField(),
            "height": serializers.IntegerField(),
            "boxes": serializers.ListField(
                child=serializers.DictField(), help_text="label, score, box [x1, y1, x2, y2]"
            ),
        },
    ),
)
@api_view(["POST"])
@parser_classes([MultiPartParser, FormParser])
def detect(request, pk: int):
    run = run_for(request.user, pk)
    min_score = _min_score(request)
    name, image = _open_upload(request)
    path, detector = _checkpoint_predictor(run, request.data.get("checkpoint", "best"), "detect")
    boxes = renderers.detect_one(detector, image, min_score)
    return Response(
        {
            "run": run.pk,
            "checkpoint": path.name,
            "image": name,
            "width": image.size[0],
            "height": image.size[1],
            "labels": detector.labels,
            "boxes": boxes,
        }  # fmt: skip
    )


@extend_schema(
    summary="Segment one image (a class per pixel, at the image's own size)",
    request={
        "multipart/form-data": inline_serializer(
            "SegmentRequest",
            {"image": serializers.ImageField(), "checkpoint": serializers.CharField(required=False, default="best")},
        )
    },
    responses=inline_serializer(
        "SegmentResponse",
        {
            "run": serializers.IntegerField(),
            "checkpoint": serializers.CharField(),
            "mask": serializers.CharField(help_text="PNG data URL, one grey byte per pixel: the class index"),
            "colors": serializers.CharField(help_text="PNG data URL of the same mask in the legend's colours"),
            "classes": serializers.ListField(child=serializers.DictField(), help_text="index, label, color, share"),
        },
    ),
)
@api_view(["POST"])
@parser_classes([MultiPartParser, FormParser])
def segment(request, pk: int):
    run = run_for(request.user, pk)
    name, image = _open_upload(request)
    path, segmenter = _checkpoint_predictor(run, request.data.get("checkpoint", "best"), "segment")
    return Response({"run": run.pk, "checkpoint": path.name, "image": name, **renderers.segment_one(segmenter, image)})


@extend_schema(
    summary="Look inside: first-layer filters and activation maps for one image",
    request={
        "multipart/form-data": inline_serializer(
            "InsideRequest",
            {
                "image": serializers.ImageField(),
                "checkpoint": serializers.CharField(required=False),
                "layers": serializers.CharField(required=False, help_text="comma-separated layer names"),
            },
        )
    },
    responses=OpenApiTypes.OBJECT,
)
@api_view(["POST"])
@parser_classes([MultiPartParser, FormParser])
def inside(request, pk: int):
    run = run_for(request.user, pk)
    name, image = _open_upload(request)
    path, classifier = _checkpoint_classifier(run, request.data.get("checkpoint", "best"))
    raw = request.data.get("layers", "") or ""
    layers = [part.strip() for part in raw.split(",") if part.strip()] or activations.default_layers(classifier.model)
    if len(layers) > 8:
        raise ValidationError({"layers": [f"choose at most 8 layers ({len(layers)} given)"]})
    try:
        body = activations.look_inside(classifier, image, layers)
    except engine.InferenceInputError as error:
        raise drf_error(services.input_error(error)) from None
    body.update(
        run=run.pk,
        checkpoint=path.name,
        image=name,
        preprocessed=engine.png_data_url(engine.as_seen(classifier, image)),
        chosen=layers,
    )
    return Response(body)


@extend_schema(summary="Checkpoints a run can be used at", responses=OpenApiTypes.OBJECT)
@api_view(["GET"])
def checkpoints(request, pk: int):
    run = run_for(request.user, pk)
    return Response({"checkpoints": services.checkpoint_choices(run=run)})


def _start_job(request, pk: int, kind: str) -> Response:
    run = run_for(request.user, pk)
    source = request.data.get("source") or ("upload" if request.FILES else "val")
    try:
        job = services.job_create(
            owner=request.user,
            run=run,
            kind=kind,
            checkpoint=request.data.get("checkpoint") or "best",
            source=source if kind == InferenceJob.Kind.TEST else InferenceJob.Source.UPLOAD,
            archive=request.FILES.get("archive"),
            files=request.FILES.getlist("images"),
        )
    except services.InferenceError as error:
        raise drf_error(error) from None
    return Response(job_json(job), status=status.HTTP_202_ACCEPTED)


JOB_MULTIPART = inline_serializer(
    "JobRequest",
    {
        "source": serializers.ChoiceField(InferenceJob.Source.values, required=False),
        "checkpoint": serializers.CharField(required=False, default="best"),
        "archive": serializers.FileField(required=False, help_text="zip or tar of images"),
        "images": serializers.ListField(child=serializers.FileField(), required=False),
    },
)
# A test job on a split needs no files, so it also takes JSON; classify-many always has files.
TEST_REQUEST = {
    "multipart/form-data": JOB_MULTIPART,
    "application/json": inline_serializer(
        "JobJsonRequest",
        {
            "source": serializers.ChoiceField(InferenceJob.Source.values, required=False),
            "checkpoint": serializers.CharField(required=False, default="best"),
        },
    ),
}
CLASSIFY_MANY_REQUEST = {"multipart/form-data": JOB_MULTIPART}


@extend_schema(
    methods=["POST"],
    summary="Start a test job (validation/test split or an uploaded labelled set)",
    request=TEST_REQUEST,
    responses={202: OpenApiTypes.OBJECT},
)
@extend_schema(methods=["GET"], summary="This run's test jobs", responses=OpenApiTypes.OBJECT)
@api_view(["GET", "POST"])
@parser_classes([MultiPartParser, FormParser, JSONObjectParser])
def test(request, pk: int):
    return _jobs_of_kind(request, pk, InferenceJob.Kind.TEST)


def _jobs_of_kind(request, pk: int, kind: str) -> Response:
    if request.method == "POST":
        return _start_job(request, pk, kind)
    run = run_for(request.user, pk)
    jobs = jobs_visible_to(request.user).filter(run=run, kind=kind)
    return Response({"results": [job_json(job) for job in jobs[:100]]})


def _many_images_endpoint(kind: str, summary: str):
    """The GET (this run's jobs of `kind`) and POST (start one) endpoint of a many-images job."""

    @extend_schema(
        methods=["POST"], summary=summary, request=CLASSIFY_MANY_REQUEST, responses={202: OpenApiTypes.OBJECT}
    )
    @extend_schema(methods=["GET"], summary=f"This run's {kind}-many jobs", responses=OpenApiTypes.OBJECT)
    @api_view(["GET", "POST"])
    @parser_classes([MultiPartParser, FormParser])
    def endpoint(request, pk: int):
        return _jobs_of_kind(request, pk, kind)

    endpoint.__name__ = f"{kind}_many"
    return endpoint


classify_many = _many_images_endpoint(
    InferenceJob.Kind.CLASSIFY, "Start a classify-many job (an archive or several images)"
)
detect_many = _many_images_endpoint(
    InferenceJob.Kind.DETECT, "Start a detect-many job on a detection run (an archive or several images)"
)
segment_many = _many_images_endpoint(
    InferenceJob.Kind.SEGMENT, "Start a segment-many job on a segmentation run (an archive or several images)"
)


def _get_job_for_user(request, pk: int) -> InferenceJob:
    return services.job_check_stale(job=job_for(request.user, pk))


@extend_schema(
    methods=["GET"], summary="A job: state, progress and (when done) its result", responses=OpenApiTypes.OBJECT
)
@extend_schema(
    methods=["DELETE"],
    summary="Delete a finished job and its files",
    responses={204: None, 409: openapi.error("The job is still queued or running.")},
)
@api_view(["GET", "DELETE"])
def job_detail(request, pk: int):
    job = _get_job_for_user(request, pk)
    if request.method == "DELETE":
        if job.is_active:
            return Response(
                {"detail": f"job {job.pk} is {job.state}; wait for it to end"}, status=status.HTTP_409_CONFLICT
            )
        services.job_delete(job=job)
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(job_json(job))


@extend_schema(summary="Per-image results of a classify-many job", responses=OpenApiTypes.OBJECT)
@api_view(["GET"])
def job_rows(request, pk: int):
    job = _get_job_for_user(request, pk)
    return Response({"results": services.job_rows(job=job)})


def csv_response(job: InferenceJob) -> FileResponse:
    path = job.folder / "out" / "results.csv"
    if job.state != InferenceJob.State.DONE or not path.exists():
        raise Http404("no results yet")
    return FileResponse(
        path.open("rb"),
        as_attachment=True,
        filename=f"{task_row(job.run.dataset.task).csv_name}-run{job.run_id}-job{job.pk}.csv",
        content_type="text/csv",
    )


@extend_schema(summary="Results of a classify-many job as CSV", responses={(200, "text/csv"): OpenApiTypes.BINARY})
@api_view(["GET"])
def job_csv(request, pk: int):
    return csv_response(_get_job_for_user(request, pk))


class IgnoreFormatNegotiation(DefaultContentNegotiation):
    """`?format=onnx` names the export, not a DRF renderer."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


EXPORT_RETRY_SECONDS = 2
EXPORT_STATE = inline_serializer(
    "ExportState",
    {
        "state": serializers.CharField(help_text="building | ready"),
        "detail": serializers.CharField(),
        "retry_after": serializers.IntegerField(required=False),
        "size": serializers.IntegerField(required=False),
        "check": serializers.DictField(
            required=False, allow_null=True, help_text="when ready: the comparison with PyTorch the export passed"
        ),
    },
)


class Download(APIView):
    """The zip of an export once a worker has built it; 202 (ask again) until then."""

    content_negotiation_class = IgnoreFormatNegotiation

    @extend_schema(
        summary="Download an export of a checkpoint as a zip",
        parameters=[
            OpenApiParameter("format", str, enum=list(exports.EXPORT_FORMATS), default="bundle"),
            OpenApiParameter("checkpoint", str, description="best | last | a step number", default="best"),
            OpenApiParameter("status", bool, description="answer the state as JSON instead of the zip when ready"),
        ],
        responses={
            (200, "application/zip"): OpenApiTypes.BINARY,
            (200, "application/json"): EXPORT_STATE,
            202: OpenApiResponse(
                response=EXPORT_STATE, description="Being built by a worker: ask again after Retry-After seconds"
            ),
        },
    )
    def get(self, request, pk: int):
        run = run_for(request.user, pk)
        fmt = request.query_params.get("format", "bundle")
        checkpoint = request.query_params.get("checkpoint", "best")
        try:
            export = exports.export_request(run=run, fmt=fmt, checkpoint=checkpoint)
        except services.InferenceError as error:
            raise drf_error(error) from None
        if export.state == "failed":
            raise drf_error(services.InferenceError(export.field, export.error))
        if export.state == "building":
            detail = f"The {fmt} export of checkpoint {checkpoint} is being built; ask again in a few seconds."
            body = {"state": "building", "detail": detail, "retry_after": EXPORT_RETRY_SECONDS}
            return Response(body, status=202, headers={"Retry-After": str(EXPORT_RETRY_SECONDS)})
        path = export.path
        if request.query_params.get("status", "").lower() in ("1", "true", "yes"):
            body = {"state": "ready", "detail": f"{path.name} is ready.", "size": path.stat().st_size}
            return Response({**body, "check": exports.export_check(path)})
        return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/zip")


download = Download.as_view()
