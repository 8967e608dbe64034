"""The README's Python API example, run as written against daphne and the real worker."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest
from rest_framework.authtoken.models import Token

from tests.conftest import REPO_ROOT
from tests.workbench.inference.conftest import digits_zip

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def readme_example() -> str:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API example\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_api_example_runs(live_server_url, celery_worker, owner, tmp_path, monkeypatch):
    digits_zip(tmp_path / "digits.zip", classes=3, per_class=20)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORKBENCH_URL", live_server_url)
    monkeypatch.setenv("WORKBENCH_TOKEN", Token.objects.create(user=owner).key)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(readme_example(), "README.md", "exec"), {"__name__": "readme"})  # noqa: S102
    lines = out.getvalue().splitlines()
    assert lines[0] == "dataset ready 60 images" and lines[1] == "run done"
    predictions = [re.fullmatch(r"(\d): (\d+\.\d)%", line) for line in lines[2:]]
    assert len(predictions) == 3 and all(predictions), lines
    assert os.path.exists(tmp_path / "digit.png")
