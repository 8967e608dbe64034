"""The image size limits of settings, for datasets/images.py's one rule (which knows no Django)."""

from __future__ import annotations

from django.conf import settings

from datasets.images import ImageLimits


def configured_image_limits() -> ImageLimits:
    """WORKBENCH_MAX_IMAGE_PIXELS, _INPUT_SIDE and _ASPECT, read when asked: a build hands them to
    its workers, an inference job to its child, and each web or Celery process sets its own."""
    return ImageLimits(
        max_pixels=settings.MAX_IMAGE_PIXELS,
        max_side=settings.MAX_IMAGE_INPUT_SIDE,
        max_aspect=settings.MAX_IMAGE_ASPECT,
    )
