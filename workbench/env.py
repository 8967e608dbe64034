"""Typed readers for environment variables.

Each helper returns a typed value or raises ImproperlyConfigured naming the variable and the
value it could not understand, so a typo in a deployment fails at start-up instead of silently
falling back to a default.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a number") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={value} is below the minimum of {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_path(name: str, default: Path) -> Path:
    """A filesystem path; relative values are taken from the current directory."""
    raw = os.environ.get(name)
    path = Path(raw) if raw else default
    return path.expanduser().resolve()


def env_path_list(name: str) -> list[Path]:
    """Paths separated by the OS path separator (':' on Linux), like PATH."""
    raw = os.environ.get(name, "")
    paths = []
    for item in raw.split(os.pathsep):
        if not item.strip():
            continue
        path = Path(item.strip()).expanduser()
        if not path.is_absolute():
            raise ImproperlyConfigured(f"{name}: {item!r} is not an absolute path")
        paths.append(path.resolve())
    return paths


class NoWorkbenchData(SystemExit):
    """Settings found no data dir and may not make one. A SystemExit with its text, so that every
    entry point (a `manage.py` command, celery, daphne) prints that one line and exits with 1,
    instead of a traceback: Django's command line would take an ImproperlyConfigured for
    "unknown command"."""


# What asks `manage.py` only for words: no command (Django lists them), `help`, a version.
_HELP_COMMANDS = {"help", "--help", "-h", "version", "--version"}


def asks_for_help(argv: list[str]) -> bool:
    """Whether this command line only prints help (`manage.py runworkbench --help`, `manage.py
    help train`): it needs no data dir and writes none. `runworkbench --help` once made ./var with
    a secret key, and the next command run in that folder met an empty database.

    Only manage.py's command line is read: another program's (pytest's xdist workers run as
    `python -c`, with no arguments) is no request for help, and took a throwaway secret key,
    signing sessions no other process of the suite could read."""
    if not argv or Path(argv[0]).name != "manage.py":
        return False
    words = argv[1:]
    options = words[1 : words.index("--")] if "--" in words else words[1:]  # after "--": arguments
    return not words or words[0] in _HELP_COMMANDS or bool({"-h", "--help"} & set(options))


def data_dir_or_exit(data_dir: Path, *, create: bool, required: bool = True) -> Path:
    """The data dir, made when `create` (the run command), else one that must exist already
    (unless not `required`: help, which reads nothing there).

    Any other command run where there is none (a second terminal without WORKBENCH_DATA_DIR)
    would leave an empty one behind (database, secret key, uploads) and fail on its empty
    database; it says where it looked and how to point it at the running workbench instead."""
    if create:
        data_dir.mkdir(parents=True, exist_ok=True)
    elif required and not data_dir.is_dir():
        raise NoWorkbenchData(
            f"no workbench data in {data_dir}: set WORKBENCH_DATA_DIR to the data dir of the running "
            "workbench (as in the terminal where it runs), or start one there with `make run` "
            "(manage.py runworkbench)"
        )
    return data_dir


def throwaway_secret() -> str:
    """A key for a process that signs nothing and must write nothing (help)."""
    return get_random_secret_key() + get_random_secret_key()


def read_or_create_secret(path: Path) -> str:
    """The secret key kept in the data dir: generated once, readable only by its owner."""
    try:
        secret = path.read_text().strip()
    except FileNotFoundError:
        secret = ""
    if secret:
        return secret
    path.parent.mkdir(parents=True, exist_ok=True)
    # Write a private temp file, then hard-link it into place: link() fails if the name exists,
    # so when two processes start at once exactly one secret wins and nobody reads a half file.
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(get_random_secret_key() + get_random_secret_key())
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temp, path)
    except FileExistsError:
        pass
    finally:
        temp.unlink()
    return path.read_text().strip()
