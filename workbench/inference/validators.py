"""What one image's answer may be asked for: the rules the API (POST /api/runs/<id>/classify/,
detect/) and `manage.py predict` share, so both take and refuse the same values in the same words."""

from __future__ import annotations

from typing import Any

from workbench.core.errors import RequestError

DEFAULT_TOP_K = 5
MAX_TOP_K = 100
DEFAULT_MIN_SCORE = 0.05


def check_top_k(raw: Any) -> int:
    """The classes to list for a classifier's image; blank for the default."""
    if raw is None or raw == "":
        return DEFAULT_TOP_K
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise RequestError("top_k", f"{str(raw)[:40]!r} is not a whole number") from None
    if not 1 <= value <= MAX_TOP_K:
        raise RequestError("top_k", f"must be between 1 and {MAX_TOP_K}")
    return value


def check_min_score(raw: Any) -> float:
    """The lowest score of a box a detector's answer keeps; blank for the default."""
    if raw is None or raw == "":
        return DEFAULT_MIN_SCORE
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise RequestError("min_score", f"{str(raw)[:40]!r} is not a number") from None
    if not 0 <= value <= 1:
        raise RequestError("min_score", "must be between 0 and 1")
    return value
