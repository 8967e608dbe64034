"""Label statistics of a built detection or segmentation dataset, gathered by the build's writer
from each image's facts (datasets.labels.prepare.TargetFacts) and stored as label_stats.json.

Detection: instances per class and split, images without objects, objects per image, histograms
of box width, height (stored pixels) and aspect (width / height, log-spaced bins), a 10 x 10 heat
map of box centres. Segmentation: images and pixels (areas) per class.
"""

from __future__ import annotations

import numpy as np

from trainer.protocol import DETECTION

SIZE_BINS = 10
ASPECT_EDGES = [0.0, 0.125, 0.25, 0.5, 0.8, 1.25, 2.0, 4.0, 8.0, float("inf")]
OBJECTS_EDGES = [0, 1, 2, 3, 5, 10, 20, 50, 100, float("inf")]
HEAT = 10


class LabelStats:
    def __init__(self, task: str, labels: list[str], width: int, height: int):
        self.task, self.labels, self.width, self.height = task, labels, width, height
        self.images = 0
        self.without_objects = 0
        self.per_split: dict[str, list[int]] = {}
        self.objects = np.zeros(len(OBJECTS_EDGES) - 1, dtype=np.int64)
        self.widths = np.zeros(SIZE_BINS, dtype=np.int64)
        self.heights = np.zeros(SIZE_BINS, dtype=np.int64)
        self.aspects = np.zeros(len(ASPECT_EDGES) - 1, dtype=np.int64)
        self.centres = np.zeros((HEAT, HEAT), dtype=np.int64)
        self.areas = np.zeros(len(labels), dtype=np.int64)

    def add(self, split: str, facts) -> None:
        self.images += 1
        counts = self.per_split.setdefault(split, [0] * len(self.labels))
        for index in facts.classes:
            counts[index] += 1
        if not facts.objects:
            self.without_objects += 1
        if self.task != DETECTION:
            for index, area in zip(facts.classes, facts.areas, strict=True):
                self.areas[index] += area
            return
        self.objects[np.searchsorted(OBJECTS_EDGES, facts.objects, side="right") - 1] += 1
        for w, h, cx, cy in facts.boxes:
            self.widths[min(int(w / self.width * SIZE_BINS), SIZE_BINS - 1)] += 1
            self.heights[min(int(h / self.height * SIZE_BINS), SIZE_BINS - 1)] += 1
            aspect = w / h if h > 0 else float("inf")
            self.aspects[min(np.searchsorted(ASPECT_EDGES, aspect, side="right") - 1, len(self.aspects) - 1)] += 1
            self.centres[min(int(cy / self.height * HEAT), HEAT - 1), min(int(cx / self.width * HEAT), HEAT - 1)] += 1

    def as_dict(self) -> dict:
        out = {
            "task": self.task,
            "images": self.images,
            # Detection: images without a box to learn from; segmentation: masks of ignore only.
            "images_without_objects": self.without_objects,
            "per_class": [
                {"name": name, **{split: counts[i] for split, counts in self.per_split.items()}}
                for i, name in enumerate(self.labels)
            ],
        }
        if self.task == DETECTION:
            step_w, step_h = self.width / SIZE_BINS, self.height / SIZE_BINS
            out.update(
                objects_per_image=_histogram(OBJECTS_EDGES, self.objects),
                box_width=_histogram([i * step_w for i in range(SIZE_BINS + 1)], self.widths),
                box_height=_histogram([i * step_h for i in range(SIZE_BINS + 1)], self.heights),
                box_aspect=_histogram(ASPECT_EDGES, self.aspects),
                box_centres=self.centres.tolist(),
            )
        else:
            total = max(int(self.areas.sum()), 1)
            out["class_areas"] = [
                {"name": name, "pixels": int(a), "share": round(int(a) / total, 6)}
                for name, a in zip(self.labels, self.areas, strict=True)
            ]
        return out


def _histogram(edges: list[float], counts: np.ndarray) -> dict:
    # JSON has no infinity: the last bin's open upper edge is null.
    return {"edges": [None if e == float("inf") else round(e, 3) for e in edges], "counts": counts.tolist()}
