"""The child process that reads a source's labels: `python -m datasets.label_child REQUEST RESULT`.

The web process and the build worker never parse a user's label files themselves: they start
this child (datasets.label_runner) under kernel limits on memory and CPU time, hand it a request
(which call, its arguments) in a pickle file and read the answer from another. A hostile file (a
100 MB XML, a mask of 16.7 million colours, a zip whose labels expand) then costs this child, which
the kernel stops at its limits, and never the process that serves every user.

No Django here: the child starts without settings (workbench.workers.processes.child_environment).
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

from datasets.archives import ArchiveError
from datasets.images import set_image_limits
from datasets.labels.common import LabelError
from datasets.labels.plan import annotated_plan
from datasets.preview import label_preview

# The calls a parent may ask for, by name: nothing else is run from a request.
CALLS = {"label_preview": label_preview, "annotated_plan": annotated_plan}


def answer(request: dict) -> tuple[str, object]:
    """("ok", result), ("refused", message naming the file) or ("memory", None)."""
    set_image_limits(request["image_limits"])  # the parent's, from its settings
    try:
        return "ok", CALLS[request["call"]](**request["kwargs"])
    except (LabelError, ArchiveError) as error:
        return "refused", str(error)
    except MemoryError:
        return "memory", None
    except RecursionError:
        return "refused", "a label file is nested too deeply to be read"


def main(request_path: str, result_path: str) -> int:
    # Both files are this workbench's own, written by the parent for this child alone.
    request = pickle.loads(Path(request_path).read_bytes())
    outcome = answer(request)
    try:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        data = pickle.dumps(("memory", None))
    Path(result_path).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
