"""Limits on what an import may cost, read once from the environment.

Every value can be changed by an administrator without touching the code; a bad value stops the
process at start-up (see workbench/env.py) instead of silently falling back.
"""

from __future__ import annotations

from workbench.env import env_float, env_int

# An archive is refused as soon as what it expands to passes any of these, counted on the bytes
# really written while streaming (headers can lie).
ARCHIVE_MAX_BYTES = env_int("WORKBENCH_ARCHIVE_MAX_BYTES", 50 * 1024**3, minimum=1)
ARCHIVE_MAX_MEMBERS = env_int("WORKBENCH_ARCHIVE_MAX_MEMBERS", 2_000_000, minimum=1)
# Expanded bytes per archive byte read. Photos barely compress (~1.05x); a zip bomb is ~1000x.
ARCHIVE_MAX_RATIO = env_float("WORKBENCH_ARCHIVE_MAX_RATIO", 100.0, minimum=1.0)
# The ratio is only judged once this much has been expanded, so a tiny archive of text files
# (which compress well) is not refused for a ratio that means nothing at that size.
ARCHIVE_RATIO_GRACE_BYTES = env_int("WORKBENCH_ARCHIVE_RATIO_GRACE_BYTES", 1024**2, minimum=0)

# Pillow's decompression-bomb limit, in pixels per image. Pillow warns above it and we turn the
# warning into a refusal (Pillow itself errors only at twice this).
MAX_IMAGE_PIXELS = env_int("WORKBENCH_MAX_IMAGE_PIXELS", 89_478_485, minimum=1)
# Largest output image side a user may ask for.
MAX_IMAGE_SIDE = env_int("WORKBENCH_MAX_IMAGE_SIDE", 4096, minimum=1)

# Builds of at most this many images run in the task's own process: starting worker processes
# costs about a second, more than such a build takes.
INLINE_BUILD_MAX_IMAGES = env_int("WORKBENCH_DATASET_INLINE_MAX_IMAGES", 64, minimum=0)
# Worker processes per build; 0 means one per available core.
BUILD_WORKERS = env_int("WORKBENCH_DATASET_BUILD_WORKERS", 0, minimum=0)
