"""Labels are read in a bounded child (datasets/label_runner.py), never in the web process: a
hostile source costs the child, which the kernel stops at its limits, and the answer names them."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import numpy as np
import psutil
import pytest
from django.core.management import CommandError, call_command
from PIL import Image

from datasets import label_runner
from datasets.labels.common import LabelError
from datasets.labels.limits import FILE_LIMITS
from datasets.models import Dataset
from tests.support import shapes as drawn

# What the web process may grow by while it checks a hostile source (the files below cost it
# 600 MB to 1 GB when it parsed them itself).
WEB_GROWTH_BYTES = 150 << 20


class PeakRss:
    """The test process's largest resident size while the block runs, sampled by a thread
    (numpy and json release or rarely hold the GIL long enough to hide a peak of hundreds of MB)."""

    def __enter__(self) -> PeakRss:
        self.process = psutil.Process()
        self.before = self.peak = self.process.memory_info().rss
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, self.process.memory_info().rss)

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()

    @property
    def growth(self) -> int:
        return self.peak - self.before


def write_png(path: Path, pixels: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels).save(path, compress_level=1)


def check(client, source: Path, **fields):
    return client.post(
        "/api/datasets/label-check/", {"source_path": str(source), **fields}, content_type="application/json"
    )


@pytest.mark.django_db
def test_it_refuses_a_label_file_that_outgrows_the_readers_memory_naming_the_limit(owner_client, import_root, settings):
    settings.LABEL_READER_MEMORY_MB = 512
    source = import_root / "coco"
    write_png(source / "images" / "a.png", np.zeros((8, 8, 3), dtype=np.uint8))
    (source / "annotations").mkdir()
    # 30 MB of empty objects: 10 million dicts, about 700 MB once parsed.
    with open(source / "annotations" / "instances.json", "w") as handle:
        handle.write('{"images": [], "annotations": [' + "{}," * 10_000_000 + "{}]}")
    with PeakRss() as rss:
        response = check(owner_client, source, task="detection")
    assert response.status_code == 400, response.json()
    assert "more than the 512 MiB of memory a label check may use" in response.json()["errors"]["format"][0]
    assert rss.growth < WEB_GROWTH_BYTES, f"the web process grew by {rss.growth >> 20} MiB"


@pytest.mark.django_db
def test_it_checks_a_mask_of_16_million_colours_outside_the_web_process(owner_client, import_root):
    source = import_root / "rgb"
    side = 4096
    colours = np.arange(side * side, dtype=np.uint32).reshape(side, side)
    mask = np.stack([(colours >> 16) & 255, (colours >> 8) & 255, colours & 255], axis=-1).astype(np.uint8)
    write_png(source / "masks" / "a.png", mask)
    del colours, mask
    write_png(source / "images" / "a.png", np.zeros((side, side), dtype=np.uint8))
    write_png(source / "masks" / "b.png", np.zeros((8, 8, 3), dtype=np.uint8))  # one usable image beside it
    write_png(source / "images" / "b.png", np.zeros((8, 8), dtype=np.uint8))
    (source / "labelmap.txt").write_text("background:0,0,0::\nthing:255,0,0::\n")
    with PeakRss() as rss:
        response = check(owner_client, source, task="segmentation", format="rgb_masks")
    assert response.status_code == 200, response.json()
    problems = [(p["file"], p["kind"]) for p in response.json()["report"]["problems"]]
    assert problems == [("masks/a.png", "bad_mask")]  # its colours are counted, and refused past 1024
    assert rss.growth < WEB_GROWTH_BYTES, f"the web process grew by {rss.growth >> 20} MiB"


def _import(source: Path) -> tuple[Dataset, str]:
    """The CLI's import of `source`, built in this process (so these settings hold): the dataset and
    what the command said on stderr, its error last ("" when it was built and said nothing)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(
            "import_dataset", str(source), "--image-size", "24x18", "--owner", "alice", "--sync",
            stdout=out, stderr=err,
        )  # fmt: skip
        error = ""
    except CommandError as failed:
        error = str(failed)
    return Dataset.objects.get(pk=int(out.getvalue().splitlines()[0])), err.getvalue() + error


def _nothing_written(dataset: Dataset) -> bool:
    return not Path(dataset.path).exists() or not any(Path(dataset.path).iterdir())


def _slow_yolo(root: Path) -> Path:
    """A YOLO source whose label files, each under its byte limit, take seconds of CPU to read."""
    shapes = drawn.make_shapes(12)
    drawn.write_yolo(root, shapes)
    line = b"0 0.5 0.5 0.2 0.2\n"
    for shape in shapes:
        (root / "labels" / f"{shape.name}.txt").write_bytes(line * (FILE_LIMITS["yolo_txt"].max_bytes // len(line)))
    return root


@pytest.mark.django_db
def test_it_gives_the_check_less_cpu_time_than_a_build_and_says_the_build_still_checks(
    owner_client, import_root, settings
):
    settings.LABEL_CHECK_CPU_SECONDS = 1
    settings.LABEL_READER_CPU_SECONDS = 1  # the build's own limit, met too: refused cleanly below
    source = _slow_yolo(import_root / "slow")
    response = check(owner_client, source, task="detection")
    assert response.status_code == 400, response.json()
    message = response.json()["errors"]["format"][0]
    assert "took more than the 1 s of CPU time a label check may take" in message
    assert message.endswith("the build will still check every file")
    # The check running out of time refuses nothing: the dataset is made, and its build reads every
    # file under the build's limit, which names itself when it is passed; nothing is left behind.
    dataset, error = _import(source)
    assert dataset.status == Dataset.Status.FAILED, dataset.status
    assert "took more than the 1 s of CPU time a build may take" in dataset.error, dataset.error
    assert "the build will still check every file" in error  # the CLI says why it went on
    assert dataset.error in error and _nothing_written(dataset)


@pytest.mark.django_db
def test_it_caps_what_a_builds_label_reading_sends_back_as_the_checks_is(owner, import_root, monkeypatch):
    monkeypatch.setattr(label_runner, "MAX_PLAN_ANSWER_BYTES", 100)
    dataset, error = _import(drawn.write_kitti(import_root / "kitti", drawn.make_shapes(2)))
    assert dataset.status == Dataset.Status.FAILED, dataset.status
    assert "the labels read for a build are over 100 bytes" in dataset.error, dataset.error
    assert _nothing_written(dataset)


def test_it_says_an_unexpected_error_in_the_child_is_internal_not_a_lack_of_memory(caplog):
    # An exception no reader expected (here a call the child cannot make) ends the child with status 1.
    with pytest.raises(LabelError) as refused:
        label_runner.run_bounded("label_preview", {"no_such_argument": 1}, label_runner.check_reading())
    assert "internal error" in str(refused.value) and "memory" not in str(refused.value)
    assert "TypeError" in caplog.text  # the traceback is the server's to read
