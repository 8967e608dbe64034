"""Benchmark cells as tables: the derived speed-up and efficiency, CSV, markdown and comparison.

Standard library only: the workbench's pages, its API and `manage.py benchmark` read cells that a
trainer wrote and render them with these functions, and `bench/gpu.sh` prints the same table.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

TABLE_KEYS = ("network", "precision", "mode", "data")  # one table per combination
CSV_FIELDS = (
    "network",
    "precision",
    "mode",
    "data",
    "gpus",
    "batch_size",
    "status",
    "images_per_sec",
    "images_per_sec_per_gpu",
    "speedup",
    "efficiency",
    "step_time_s",
    "data_wait_share",
    "peak_memory_bytes",
    "memory_needed_bytes",
)


def table_key(cell: dict[str, Any]) -> tuple:
    return tuple(cell.get(key) for key in TABLE_KEYS)


def derive(cells: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of `cells` with `speedup` (images/s over the smallest GPU count measured at the same
    per-GPU batch, one GPU in a plain grid) and `efficiency` (speed-up / the GPU ratio)."""
    cells = [dict(cell) for cell in cells]
    base: dict[tuple, dict] = {}
    for cell in sorted(cells, key=lambda c: c.get("gpus") or 0):
        if cell.get("status") == "ok":
            base.setdefault((*table_key(cell), cell.get("batch_size")), cell)
    for cell in cells:
        ref = base.get((*table_key(cell), cell.get("batch_size")))
        if cell.get("status") != "ok" or ref is None or not ref.get("images_per_sec"):
            cell["speedup"] = cell["efficiency"] = None
            continue
        speedup = cell["images_per_sec"] / ref["images_per_sec"]
        cell["speedup"] = speedup
        cell["efficiency"] = speedup / (cell["gpus"] / ref["gpus"])
    return cells


def tables(cells: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table per network, precision, mode and data: rows = batch sizes, columns = GPU counts."""
    grouped: dict[tuple, list[dict]] = defaultdict(list)
    for cell in cells:
        grouped[table_key(cell)].append(cell)
    out = []
    for key, group in grouped.items():
        gpus = sorted({c["gpus"] for c in group})
        batches = sorted({c["batch_size"] for c in group})
        by = {(c["batch_size"], c["gpus"]): c for c in group}
        rows = [{"batch_size": b, "cells": [by.get((b, g)) for g in gpus]} for b in batches]
        out.append({**dict(zip(TABLE_KEYS, key, strict=True)), "gpus": gpus, "rows": rows})
    return out


def cell_text(cell: dict[str, Any] | None) -> str:
    if cell is None:
        return ""
    if cell.get("status") == "oom":
        return "OOM"
    if cell.get("status") != "ok":
        return "failed"
    text = f"{cell['images_per_sec']:,.0f}"
    if cell.get("speedup") is not None and cell.get("gpus", 1) > 1:
        text += f" ({cell['speedup']:.2f}x)"
    return text


def markdown(cells: Iterable[dict[str, Any]], *, title: str = "") -> str:
    """The tables as the material prints them: images/s (speed-up) per cell, OOM where it did not fit."""
    lines = [f"# {title}", ""] if title else []
    for table in tables(derive(cells)):
        lines.append(f"## {table['network']}, {table['precision']}, {table['mode']}, {table['data']} data")
        lines.append("")
        lines.append("| batch / GPU | " + " | ".join(f"{g} GPU{'s' if g > 1 else ''}" for g in table["gpus"]) + " |")
        lines.append("| ---: |" + " ---: |" * len(table["gpus"]))
        for row in table["rows"]:
            lines.append(f"| {row['batch_size']} | " + " | ".join(cell_text(c) for c in row["cells"]) + " |")
        lines.append("")
    return "\n".join(lines)


def to_csv(cells: Iterable[dict[str, Any]]) -> str:
    """One row per cell: the GPU count, the batch size, images/s and the speed-up (and the rest)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for cell in sorted(derive(cells), key=lambda c: (*map(str, table_key(c)), c["gpus"], c["batch_size"])):
        writer.writerow({key: cell.get(key) for key in CSV_FIELDS})
    return buffer.getvalue()


def cell_key(cell: dict[str, Any]) -> tuple:
    """What makes two cells the same measurement: network, precision, mode, data, GPUs, batch."""
    return (*table_key(cell), cell.get("gpus"), cell.get("batch_size"))


def compare(left: Iterable[dict[str, Any]], right: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cells present in both (same network, precision, mode, data, GPU count and batch), with
    the ratio left / right of their images/s, read as "left vs right": above 1, left is faster
    (None where either did not run)."""
    index = {cell_key(c): c for c in right}
    pairs = []
    for cell in left:
        other = index.get(cell_key(cell))
        if other is None:
            continue
        ratio = None
        if cell.get("status") == other.get("status") == "ok" and other.get("images_per_sec"):
            ratio = cell["images_per_sec"] / other["images_per_sec"]
        pairs.append({**{k: cell.get(k) for k in (*TABLE_KEYS, "gpus", "batch_size")}, "left": cell, "right": other,
                      "ratio": ratio})  # fmt: skip
    return pairs
