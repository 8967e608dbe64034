"""One way to start a child process of a worker (a trainer, an inference or export engine, a
benchmark): the right environment, no terminal, and death with its parent."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import IO

from django.conf import settings


def die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (PR_SET_PDEATHSIG), so a killed
    worker never leaves orphans behind; a trainer then saves a checkpoint on its way out."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGTERM)


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child that is not a Django process: the engines import no
    Django, and the repository root is on the path so `python -m trainer` finds its package."""
    env = {**os.environ, **(extra or {}), "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), os.environ.get("PYTHONPATH", "")]))
    return env


def start_child(
    argv: Sequence[str],
    *,
    stdout: IO | int,
    stderr: IO | int = subprocess.STDOUT,
    env: Mapping[str, str] | None = None,
    own_session: bool = False,
) -> subprocess.Popen:
    """Starts `argv` from the repository root with `child_environment(env)`.

    `own_session` puts the child in a process group of its own, so a stop signal sent to the
    group reaches all of its processes (every rank and data loader of a trainer).
    """
    return subprocess.Popen(
        list(argv),
        cwd=settings.BASE_DIR,
        env=child_environment(env),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=own_session,
        preexec_fn=die_with_parent,  # noqa: PLW1509  (only prctl, safe after fork)
    )
