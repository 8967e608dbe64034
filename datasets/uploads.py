"""Archive uploads: streamed to disk under a size cap, kept per user until a dataset uses them.

An upload lives in DATA_DIR/uploads/<user id>/<token>/<file name>; the token (a random hex id)
is what the wizard and the API hand back to create a dataset from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import StopUpload, TemporaryFileUploadHandler

from datasets.archives import archive_kind
from datasets.models import Dataset

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
    """The complete uploaded file behind a token, or None (also for another user's token)."""
    folder = _folder(user_id, token)
    if folder is None:
        return None
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    return files[0] if len(files) == 1 else None


# --------------------------------------------------------------------------------------------
# Chunked uploads: the browser sends a big archive as a series of small requests, so no web
# server process ever holds more than one chunk (daphne buffers a whole request body in memory).
# --------------------------------------------------------------------------------------------

CHUNK_BYTES = 8 * 1024 * 1024
META = ".upload.json"
PART = ".data.part"


class UploadError(ValueError):
    """A chunk or upload request that is refused; `status` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400, received: int | None = None):
        super().__init__(message)
        self.status = status
        self.received = received


def _folder(user_id: int, token: str) -> Path | None:
    if not TOKEN_RE.match(token or ""):
        return None
    folder = _user_dir(user_id) / token
    return folder if folder.is_dir() else None


UNUSED_UPLOAD_SECONDS = 24 * 3600


def upload_prune(*, user_id: int, older_than: float = UNUSED_UPLOAD_SECONDS) -> int:
    """Delete this user's uploads untouched for `older_than` seconds that no dataset uses
    (abandoned wizards, interrupted uploads); returns how many went."""
    root = _user_dir(user_id)
    if not root.is_dir():
        return 0
    cutoff = time.time() - older_than
    removed = 0
    for folder in root.iterdir():
        if not (folder.is_dir() and TOKEN_RE.match(folder.name)):
            continue
        newest = max((p.stat().st_mtime for p in folder.iterdir()), default=folder.stat().st_mtime)
        if newest < cutoff and not Dataset.objects.filter(source__upload=folder.name).exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def upload_start(*, user_id: int, filename: str, size: int) -> str:
    """Open a chunked upload of `size` bytes; returns its token."""
    upload_prune(user_id=user_id)
    if size <= 0:
        raise UploadError("The archive is empty (size 0).")
    if size > settings.MAX_UPLOAD_BYTES:
        raise UploadError(too_large_message(), status=413)
    token = uuid.uuid4().hex
    folder = _user_dir(user_id) / token
    folder.mkdir(parents=True)
    (folder / META).write_text(json.dumps({"filename": safe_filename(filename), "size": size}))
    (folder / PART).touch()
    return token


def upload_status(*, user_id: int, token: str) -> dict | None:
    folder = _folder(user_id, token)
    if folder is None:
        return None
    complete = upload_path(user_id=user_id, token=token)
    if complete is not None:
        size = complete.stat().st_size
        return {"upload": token, "filename": complete.name, "size": size, "received": size, "complete": True}
    try:
        meta = json.loads((folder / META).read_text())
        received = (folder / PART).stat().st_size
    except (OSError, ValueError):
        return None
    return {
        "upload": token,
        "filename": meta["filename"],
        "size": meta["size"],
        "received": received,
        "complete": False,
    }


def upload_append(*, user_id: int, token: str, offset: int, stream, length: int) -> dict:
    """Append one chunk read from `stream` at `offset`; completes the upload at its declared size."""
    state = upload_status(user_id=user_id, token=token)
    if state is None:
        raise UploadError("No such upload.", status=404)
    if state["complete"]:
        raise UploadError("This upload is already complete.", status=409, received=state["received"])
    if offset != state["received"]:
        raise UploadError(
            f"Expected the chunk at offset {state['received']}, not {offset}.", status=409, received=state["received"]
        )
    if length > CHUNK_BYTES:
        raise UploadError(f"A chunk may hold at most {CHUNK_BYTES} bytes.", status=413)
    if offset + length > state["size"]:
        raise UploadError(f"The chunk goes past the declared size of {state['size']} bytes.", status=413)
    folder = _user_dir(user_id) / token
    written = 0
    with open(folder / PART, "ab") as out:
        while written < length:
            data = stream.read(min(1 << 20, length - written))
            if not data:
                break
            out.write(data)
            written += len(data)
    if written != length:
        # A short body: cut the file back so the client can resend this chunk.
        os.truncate(folder / PART, offset)
        raise UploadError(
            f"The chunk ended after {written} of {length} bytes; send it again.", status=400, received=offset
        )
    received = offset + written
    if received == state["size"]:
        os.replace(folder / PART, folder / state["filename"])
        (folder / META).unlink()
        if archive_kind(folder / state["filename"]) is None:
            # Refused while the user is still on the step where the file was chosen.
            shutil.rmtree(folder, ignore_errors=True)
            raise UploadError(
                f"{state['filename']} is not a zip or tar archive (judged by its content, not its name); "
                "choose a zip, tar or tar.gz of class folders."
            )
    return upload_status(user_id=user_id, token=token)


def upload_delete(*, user_id: int, token: str) -> None:
    if TOKEN_RE.match(token or ""):
        shutil.rmtree(_user_dir(user_id) / token, ignore_errors=True)
