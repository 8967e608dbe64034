"""A detector's boxes in a test's pictures (drawn here, in Python) take the pages' one palette
(static/workbench/palette.js, Okabe-Ito), stay visible on a light and on a dark picture, and
carry their labels as the detect page does: in black or white on the class's colour, whole."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.conftest import REPO_ROOT
from workbench.inference.evaluation import BOX_COLOURS, _draw_boxes, _ink_on, _luminance

PALETTE_JS = REPO_ROOT / "static" / "workbench" / "palette.js"


def test_it_draws_boxes_with_the_pages_palette():
    found = re.search(r"export const PALETTE = (\[[^\]]*\]);", PALETTE_JS.read_text())
    assert found, f"{PALETTE_JS}: no PALETTE list"
    assert list(BOX_COLOURS) == json.loads(found.group(1))


def test_it_writes_each_label_in_the_ink_the_page_chooses_at_4_5_to_1():
    import playwright  # its own Node runs the page's module as the browser would

    node = Path(playwright.__file__).parent / "driver" / "node"
    script = (
        f"import {{ PALETTE, inkOn }} from {json.dumps(PALETTE_JS.as_uri())};"
        "console.log(JSON.stringify(PALETTE.map(inkOn)));"
    )
    out = subprocess.run([str(node), "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [_ink_on(colour) for colour in BOX_COLOURS]
    for colour in BOX_COLOURS:
        lighter, darker = sorted(
            (_luminance(colour), _luminance(_ink_on(colour))),
            reverse=True,
        )
        assert (lighter + 0.05) / (darker + 0.05) >= 4.5, colour


@pytest.mark.parametrize("background", [0, 255], ids=["dark", "light"])
def test_it_edges_every_classs_box_in_black_on_light_and_dark_pictures(background):
    picture = torch.full((3, 192, 192), background, dtype=torch.uint8)  # drawn at its own size
    for class_id, colour in enumerate(BOX_COLOURS, start=1):
        drawn = _draw_boxes(picture, torch.tensor([[40.0, 40.0, 150.0, 150.0]]), torch.tensor([class_id]), None,
                            ["x"] * len(BOX_COLOURS))  # fmt: skip
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        # Across the box's left side at mid-height: the picture, black, the colour twice, black, the picture.
        row = [drawn.getpixel((x, 100)) for x in range(38, 44)]
        assert row == [(background,) * 3, (0, 0, 0), rgb, rgb, (0, 0, 0), (background,) * 3], colour


def test_it_keeps_a_label_whole_at_the_pictures_edges():
    picture = torch.full((3, 192, 192), 128, dtype=torch.uint8)

    def inked(box: list[float]) -> int:
        drawn = _draw_boxes(picture, torch.tensor([box]), torch.tensor([1]), torch.tensor([0.87]), ["pedestrian"])
        return int((np.asarray(drawn).min(axis=2) > 200).sum())  # white on the first class's blue

    whole = inked([60.0, 60.0, 120.0, 120.0])
    assert whole > 20
    # A box in the top right corner: its label neither above the picture nor past its right edge.
    assert inked([170.0, 0.0, 192.0, 20.0]) == whole
