"""A detector's boxes in a test's pictures (drawn here, in Python) take the pages' one palette
(static/workbench/palette.js, Okabe-Ito), and stay visible on a light and on a dark picture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from workbench.inference.evaluation import BOX_COLOURS, _draw_boxes

PALETTE_JS = Path(__file__).resolve().parents[3] / "static" / "workbench" / "palette.js"


def test_it_draws_boxes_with_the_pages_palette():
    found = re.search(r"export const PALETTE = (\[[^\]]*\]);", PALETTE_JS.read_text())
    assert found, f"{PALETTE_JS}: no PALETTE list"
    assert list(BOX_COLOURS) == json.loads(found.group(1))


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
