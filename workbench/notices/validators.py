"""Every rule on a user's notice settings, for the page, the API and any command alike."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from workbench.core.errors import RequestError
from workbench.notices.models import KINDS

FIELDS = (
    "kinds", "email_enabled", "email", "webhook_url", "webhook_secret", "apprise_url", "stall_minutes", "idle_minutes",
)  # fmt: skip


def clean_settings(data: dict) -> dict:
    """The fields of `data` that are settings, cleaned; RequestError names the first bad one."""
    unknown = set(data) - set(FIELDS)
    if unknown:
        raise RequestError(sorted(unknown)[0], f"not a setting; the settings are {', '.join(FIELDS)}")
    cleaned: dict = {}
    if "kinds" in data:
        kinds = data["kinds"]
        if not isinstance(kinds, list) or any(kind not in KINDS for kind in kinds):
            raise RequestError("kinds", f"a list of {', '.join(KINDS)}")
        cleaned["kinds"] = sorted(set(kinds), key=list(KINDS).index)
    if "email_enabled" in data:
        if not isinstance(data["email_enabled"], bool):
            raise RequestError("email_enabled", "true or false")
        cleaned["email_enabled"] = data["email_enabled"]
    if "email" in data:
        cleaned["email"] = _email(data["email"])
    if "webhook_url" in data:
        cleaned["webhook_url"] = _url(data["webhook_url"], field="webhook_url", schemes=("http", "https"))
    if "webhook_secret" in data:
        secret = data["webhook_secret"]
        if not isinstance(secret, str) or (secret and not 16 <= len(secret) <= 200):
            raise RequestError("webhook_secret", "16 to 200 characters (or empty: unsigned)")
        cleaned["webhook_secret"] = secret
    if "apprise_url" in data:
        cleaned["apprise_url"] = _url(data["apprise_url"], field="apprise_url", schemes=None)
    for name in ("stall_minutes", "idle_minutes"):
        if name in data:
            minutes = data[name]
            if isinstance(minutes, bool) or not isinstance(minutes, int) or not 5 <= minutes <= 1440:
                raise RequestError(name, "a whole number of minutes from 5 to 1440")
            cleaned[name] = minutes
    return cleaned


def _email(value: object) -> str:
    if value in ("", None):
        return ""
    try:
        validate_email(value)
    except ValidationError:
        raise RequestError("email", f"{value!r} is not an email address") from None
    return str(value)


def _url(value: object, *, field: str, schemes: tuple[str, ...] | None) -> str:
    if value in ("", None):
        return ""
    if not isinstance(value, str) or len(value) > 500:
        raise RequestError(field, "a URL of at most 500 characters")
    parts = urlsplit(value)
    if not parts.scheme or (schemes and parts.scheme not in schemes) or not parts.netloc:
        allowed = " or ".join(f"{scheme}://" for scheme in schemes) if schemes else "scheme://"
        raise RequestError(field, f"a URL starting {allowed}")
    return value
