"""Labels are read in a bounded child (datasets/label_runner.py), never in the web process: a
hostile source costs the child, which the kernel stops at its limits, and the answer names them."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import psutil
import pytest
from PIL import Image

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
    (source / "labelmap.txt").write_text("background:0,0,0::\nthing:255,0,0::\n")
    with PeakRss() as rss:
        response = check(owner_client, source, task="segmentation", format="rgb_masks")
    assert response.status_code == 200, response.json()
    assert [p["file"] for p in response.json()["report"]["problems"]] == ["masks/a.png"]
    assert rss.growth < WEB_GROWTH_BYTES, f"the web process grew by {rss.growth >> 20} MiB"
