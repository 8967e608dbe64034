"""Runs a page's ES module under Node (Playwright's own, as tests/workbench/runs/test_numbers.py
does), for the parts of a page script that are plain functions."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT


def run_module(path: str, body: str, **values) -> object:
    """Imports static/<path> as `module`, binds each of `values` by its name, runs `body`, and
    returns what it printed last as JSON."""
    import playwright

    node = Path(playwright.__file__).parent / "driver" / "node"
    bound = "".join(f"const {name} = {json.dumps(value)};" for name, value in values.items())
    script = f"import * as module from {json.dumps((REPO_ROOT / 'static' / path).as_uri())};{bound}{body}"
    out = subprocess.run([str(node), "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
