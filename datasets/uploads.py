"""Archive uploads: streamed to disk under a size cap, kept per user until a dataset uses them.

An upload lives in DATA_DIR/uploads/<user id>/<token>/<file name>; the token (a random hex id)
is what the wizard and the API hand back to create a dataset from it.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler

TOKEN_RE = re.compile(r"^[0-9a-f]{32}$")


def too_large_message() -> str:
    return f"The upload is larger than the limit of {settings.MAX_UPLOAD_BYTES} bytes (WORKBENCH_MAX_UPLOAD_BYTES)."


class CappedUploadHandler(TemporaryFileUploadHandler):
    """Streams to FILE_UPLOAD_TEMP_DIR and stops as soon as MAX_UPLOAD_BYTES is passed.

    The declared Content-Length is checked first, and the bytes are counted as they arrive,
    because a client can lie about the length or send it chunked.
    """

    def __init__(self, request=None):
        super().__init__(request)
        self.received = 0
        self.too_large = False

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > settings.MAX_UPLOAD_BYTES:
            self.too_large = True
            self.file.close()
            raise StopUpload(connection_reset=True)
        return super().receive_data_chunk(raw_data, start)


def request_too_large(request) -> bool:
    """Content-Length alone says the request is over the cap (checked before reading the body)."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    return length > settings.MAX_UPLOAD_BYTES + 64 * 1024


def capped_handlers(request) -> list:
    return [CappedUploadHandler(request)]


def _user_dir(user_id: int) -> Path:
    return Path(settings.DATA_DIR) / "uploads" / str(int(user_id))


def safe_filename(name: str) -> str:
    name = Path(name.replace("\\", "/")).name.strip().lstrip(".")
    name = re.sub(r"[^\w.\- ]", "_", name)[:120]
    return name or "upload"


def upload_save(*, user_id: int, uploaded_file) -> tuple[str, Path]:
    """Move a finished upload into the user's upload area; returns (token, path)."""
    token = uuid.uuid4().hex
    folder = _user_dir(user_id) / token
    folder.mkdir(parents=True)
    target = folder / safe_filename(uploaded_file.name)
    temp_path = getattr(uploaded_file, "temporary_file_path", None)
    if temp_path is not None:
        # Move first (a rename on the same disk), then close: closing deletes the temp file.
        shutil.move(temp_path(), target)
        uploaded_file.close()
    else:
        with open(target, "wb") as out:
            for chunk in uploaded_file.chunks():
                out.write(chunk)
    return token, target


def upload_path(*, user_id: int, token: str) -> Path | None:
    """The uploaded file behind a token, or None (also for another user's token)."""
    if not TOKEN_RE.match(token or ""):
        return None
    folder = _user_dir(user_id) / token
    files = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    return files[0] if len(files) == 1 else None


def upload_delete(*, user_id: int, token: str) -> None:
    if TOKEN_RE.match(token or ""):
        shutil.rmtree(_user_dir(user_id) / token, ignore_errors=True)
