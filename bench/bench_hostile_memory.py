"""Hostile files against the web process: how much its peak memory grows while each hostile input
of issue 31 goes through one of the web's doors, against what the issue measured before the fix.

Each case runs in a fresh process of this script (`--case NAME`), because peak RSS only ever
rises: one case's peak would hide the next one's. That process sets Django up on a throwaway data
dir (workbench.settings, SQLite migrated by the parent, no Redis: the file cache and in-memory
channels), logs in with Django's test Client and sends first a benign input through the same door
(so that imports and first-request costs are not counted), then the hostile one. Its growth is
the peak RSS during the hostile request (getrusage's ru_maxrss where it rose, else psutil's RSS
sampled every 2 ms) minus the RSS just before it. An upload's body is read from a file: the
Client would hold it whole in memory, which no server does, and that copy would be counted.

Only the web process is measured. A label check is read in a child under kernel limits
(datasets/label_runner.py, LABEL_READER_MEMORY_MB): that child's peak and CPU time are shown
apart, from getrusage(RUSAGE_CHILDREN) (the largest child reaped so far, the warm-up's included).

    .venv/bin/python bench/bench_hostile_memory.py
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MB = 1024**2
LABEL_CHECK = "/api/datasets/label-check/"


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # the hostile input
    door: str  # the web's door it goes through
    before_mb: float | None  # the growth of the web process before the fix
    before_s: float | None  # the time before the fix (the RLE's is CPU seconds)
    before: str  # the words


CASES = [
    Case("yaml", "YOLO data.yaml, nested aliases (billion laughs)", "label check, server folder",
         2.8 * 1024, None, "393-byte YAML: +2.8 GB"),
    Case("yaml-zip", "the same data.yaml in a zip", "upload + label check",
         914, None, "639 KB zip: +914 MB"),
    Case("voc", "VOC XML annotation of 100 MB", "label check, server folder",
         2.3 * 1024, 47, "+2.3 GB, 47 s"),
    Case("mask", "RGB mask of 16.7M colours, 4096 x 4096", "label check, server folder",
         752, None, "+752 MB"),
    Case("png", "PNG of 1 x 80,000,000 pixels", "POST /api/runs/<id>/classify/",
         2.9 * 1024, None, "~2.9 GB"),
    Case("png-preview", "the same PNG, first image of a class folder", "POST /datasets/new/preview/",
         2.9 * 1024, None, "~2.9 GB"),
    Case("bomb", "padded weights bomb: 11 MB, inflates by 1 GB", "POST /api/pretrained/",
         1024, None, "+1 GB"),
    Case("rle", "COCO RLE counts string of 1 MB: a million runs", "label check, server folder",
         None, 26, "26 s CPU"),
    Case("rle-endless", "COCO RLE counts string of 1 MB: one endless number", "label check, server folder",
         None, 26, "26 s CPU"),
]  # fmt: skip


# --- the hostile files (made by the parent; nothing of this is measured) ---------------------


def _small_yolo(root: Path) -> Path:
    """One image of a shape in YOLO's layout, the image flat so that its zip stays under a KB."""
    from PIL import Image

    from tests.support import shapes

    drawn = shapes.make_shapes(1)
    shapes.write_yolo(root, drawn)
    Image.new("RGB", (48, 36)).save(root / "images" / f"{drawn[0].name}.png")
    return root


def _yolo_laughs(root: Path) -> Path:
    from tests.datasets.labels.test_yolo import _laughs

    _small_yolo(root)
    (root / "classes.txt").unlink()
    (root / "data.yaml").write_text(_laughs(9))  # a billion "lol"s once expanded
    return root


def _voc_100mb(root: Path) -> Path:
    from tests.support import shapes

    drawn = shapes.make_shapes(2)
    shapes.write_voc(root, drawn)
    box = "<bndbox><xmin>1</xmin><ymin>1</ymin><xmax>9</xmax><ymax>9</ymax></bndbox>"
    thing = f"<object><name>square</name>{box}</object>"
    with (root / "Annotations" / f"{drawn[0].name}.xml").open("w") as handle:
        handle.write(f"<annotation><filename>{drawn[0].name}.png</filename><size><width>48</width>")
        handle.write("<height>36</height><depth>3</depth></size>")
        block = thing * 10_000
        for _ in range(100 * MB // len(block)):
            handle.write(block)
        handle.write("</annotation>")
    return root


def _all_colours_mask(root: Path) -> Path:
    import numpy as np
    from PIL import Image

    from tests.support import shapes

    drawn = shapes.make_shapes(2)
    shapes.write_rgb_masks(root, drawn)
    colours = np.arange(1 << 24, dtype=np.uint32).reshape(4096, 4096)
    mask = np.stack([(colours >> 16) & 255, (colours >> 8) & 255, colours & 255], axis=-1).astype(np.uint8)
    Image.fromarray(mask).save(root / "masks" / f"{drawn[1].name}.png")
    Image.new("RGB", (4096, 4096)).save(root / "images" / f"{drawn[1].name}.png")
    return root


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _thin_png(path: Path, height: int = 80_000_000) -> Path:
    """A grey PNG 1 pixel wide and `height` tall: 2 bytes a row (filter, pixel), deflated ~1000:1."""
    deflate = zlib.compressobj(9)
    rows = b"\0\0" * (1 << 20)
    body = [deflate.compress(rows) for _ in range(height // (1 << 20))]
    body += [deflate.compress(b"\0\0" * (height % (1 << 20))), deflate.flush()]
    header = struct.pack(">IIBBBBB", 1, height, 8, 0, 0, 0, 0)
    chunks = _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", b"".join(body)) + _png_chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunks)
    return path


def _class_folders(root: Path, first: Path) -> Path:
    """Two classes of two small images, and `first` as the first image of the first class: the one
    the wizard's preview opens first."""
    from PIL import Image

    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for index in (1, 2):
            Image.new("L", (32, 32)).save(root / name / f"{index}.png")
    shutil.copyfile(first, root / "a" / "0.png")
    return root


def _weights_bomb(path: Path) -> Path:
    import torch

    from tests.support.weights_files import padded_bomb

    return padded_bomb({"weight": torch.zeros(4, 4)}, path, padding=10 * MB, bomb_bytes=1024 * MB)


def _rle_1mb(root: Path, counts: str) -> Path:
    from tests.datasets.labels.test_coco import rle, write_source

    return write_source(root, [rle(counts)])


def _zipped(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder.parent))
    return archive


def make_files(imports: Path, scratch: Path) -> dict[str, str]:
    """Every hostile file and the benign input of the same door, by name."""
    from PIL import Image

    from tests.datasets.labels.test_coco import SIDE, write_source
    from tests.support import shapes

    files = {
        "yaml": _yolo_laughs(imports / "laughs"),
        "voc": _voc_100mb(imports / "voc-100mb"),
        "mask": _all_colours_mask(imports / "colours"),
        "png": _thin_png(scratch / "thin.png"),
        "bomb": _weights_bomb(scratch / "bomb.pt"),
        # As tests/datasets/labels/test_coco.py: a million runs of 1 on a SIDE x SIDE image, then
        # a number whose continuation bit never ends; either took the quadratic decode 26 s.
        "rle": _rle_1mb(imports / "rle", "111" + "0" * (SIDE * SIDE - 3)),
        "rle-endless": _rle_1mb(imports / "rle-endless", "o" * 1_000_000),
        "benign-yolo": _small_yolo(imports / "benign-yolo"),
        "benign-voc": shapes.write_voc(imports / "benign-voc", shapes.make_shapes(2)),
        "benign-rgb": shapes.write_rgb_masks(imports / "benign-rgb", shapes.make_shapes(2)),
        "benign-coco": write_source(imports / "benign-coco", []),
        "benign-png": scratch / "small.png",
        "benign-weights": scratch / "not-weights.pt",
    }
    files["yaml-zip"] = _zipped(files["yaml"], scratch / "laughs.zip")
    Image.new("L", (32, 32)).save(files["benign-png"])
    files["png-preview"] = _class_folders(imports / "thin-classes", files["png"])
    files["benign-classes"] = _class_folders(imports / "benign-classes", files["benign-png"])
    files["benign-zip"] = _zipped(files["benign-yolo"], scratch / "benign.zip")
    files["benign-weights"].write_bytes(os.urandom(4096))
    return {name: str(path) for name, path in files.items()}


# --- one case, in its own process -------------------------------------------------------------


class PeakSampler(threading.Thread):
    """psutil's RSS every 2 ms: the peak of a request that stays under an earlier high-water mark,
    which ru_maxrss cannot show."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        import psutil

        self.process, self.peak, self.running = psutil.Process(), 0, True

    def run(self) -> None:
        while self.running:
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.002)


def _multipart(field: str, path: str) -> tuple[Path, str]:
    """The upload's multipart body, written to a file beside it before the measure."""
    from django.test.client import BOUNDARY, encode_multipart

    body = Path(path + ".body")
    with open(path, "rb") as handle:
        body.write_bytes(encode_multipart(BOUNDARY, {field: handle}))
    return body, "multipart/form-data; boundary=" + BOUNDARY


def _post_file(client, url: str, upload: tuple[Path, str]):
    """POST the body read from its file: the Client would hold a copy of it in memory (FakePayload),
    which no server holds and the measure would count as the web's."""
    body, content_type = upload
    with body.open("rb") as handle:
        environ = {"wsgi.input": handle, "CONTENT_LENGTH": str(body.stat().st_size), "CONTENT_TYPE": content_type}
        return client.generic("POST", url, **environ)


def _check(client, source: str, task: str, fmt: str):
    body = {"source_path": source, "task": task, "format": fmt}
    return client.post(LABEL_CHECK, body, content_type="application/json")


def _requests(case: str, files: dict[str, str], client, run_pk: int) -> tuple:
    """(benign request, hostile request): callables of no argument answering a response."""
    label = {"yaml": ("yolo", "detection", "yaml"), "voc": ("voc", "detection", "voc"),
             "mask": ("rgb", "segmentation", "mask"), "rle": ("coco", "segmentation", "rle"),
             "rle-endless": ("coco", "segmentation", "rle-endless")}  # fmt: skip
    if case in label:
        benign, task, hostile = label[case]
        fmt = {"yolo": "yolo", "voc": "voc", "rgb": "rgb_masks", "coco": "coco_masks"}[benign]
        return (lambda: _check(client, files[f"benign-{benign}"], task, fmt),
                lambda: _check(client, files[hostile], task, fmt))  # fmt: skip
    if case == "yaml-zip":
        bodies = {name: _multipart("archive", files[name]) for name in ("benign-zip", "yaml-zip")}

        def upload_and_check(name: str):
            token = _post_file(client, "/api/datasets/uploads/", bodies[name]).json()
            body = {"upload": token["upload"], "task": "detection", "format": "yolo"}
            return client.post(LABEL_CHECK, body, content_type="application/json")

        return lambda: upload_and_check("benign-zip"), lambda: upload_and_check("yaml-zip")
    if case == "png-preview":
        preview = "/datasets/new/preview/"
        return (lambda: client.post(preview, {"source_path": files["benign-classes"]}),
                lambda: client.post(preview, {"source_path": files["png-preview"]}))  # fmt: skip
    url, field, benign = {
        "png": (f"/api/runs/{run_pk}/classify/", "image", "benign-png"),
        "bomb": ("/api/pretrained/", "file", "benign-weights"),
    }[case]
    bodies = {name: _multipart(field, files[name]) for name in (benign, case)}
    return lambda: _post_file(client, url, bodies[benign]), lambda: _post_file(client, url, bodies[case])


def first_line(response) -> str:
    """The answer's first message: a refusal's first error, or a label check's first problem."""
    try:
        body = response.json()
    except ValueError:
        text = response.content[:1000].decode(errors="replace")
        return next((line.strip() for line in text.splitlines() if line.strip()), "")[:160]
    problems = body.get("report", {}).get("problems") if isinstance(body, dict) else None
    if problems:
        file, message = problems[0]["file"], problems[0]["message"]
        return f"problem: {message}" if message.startswith(file) else f"problem: {file}: {message}"
    if isinstance(body, dict) and "images" in body:
        return f"{body['images']} images, no problem"
    if isinstance(body, dict) and "original_size" in body:  # the wizard's preview: the image it showed
        return f"previews {body['file']}, {body['original_size'][0]} x {body['original_size'][1]}"
    while isinstance(body, dict | list) and body:
        body = next(iter(body.values())) if isinstance(body, dict) else body[0]
    return str(body).splitlines()[0][:160]


def run_case(case: str, files: dict[str, str]) -> dict:
    import django

    django.setup()
    import psutil
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()  # as the test runner does: the Client's host, "testserver", is allowed

    from tests.support.factories import make_dataset_row
    from workbench.runs.models import Run

    owner = get_user_model().objects.create_user(f"bench-{case}")
    run = Run.objects.create(owner=owner, name="bench", dataset=make_dataset_row(owner), network="lenet",
                             state=Run.State.DONE)  # fmt: skip
    client = Client()
    client.force_login(owner)
    benign, hostile = _requests(case, files, client, run.pk)
    warm = benign()
    gc.collect()
    rss_before = psutil.Process().memory_info().rss
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = PeakSampler()
    sampler.start()
    started = time.perf_counter()
    response = hostile()
    seconds = time.perf_counter() - started
    sampler.running = False
    sampler.join()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = max(maxrss if maxrss > maxrss_before else 0, sampler.peak)
    return {
        "warm_status": warm.status_code,
        "status": response.status_code,
        "answer": first_line(response),
        "seconds": seconds,
        "rss_before_mb": rss_before / MB,
        # A peak under the earlier high-water mark is seen by the sampler only: at most this much.
        "headroom_mb": (maxrss_before - rss_before) / MB,
        "growth_mb": (peak - rss_before) / MB,
        "child_peak_mb": after.ru_maxrss / 1024,
        "child_cpu_s": after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime,
    }


# --- the parent: files, database, one process per case, the table ----------------------------


def _ratio(ours: float, before: float | None) -> str:
    """Ours as a share of the issue's number (the growth left is near the noise: a percentage reads better)."""
    return f"{100 * ours / before:.2g}%" if before else "-"


def print_table(results: list[tuple[Case, dict]], sizes: dict[str, int]) -> None:
    print("hostile inputs through the web's doors: the web process's peak RSS growth (one process per case)")
    print("| hostile input (its bytes) | door | answer | web +MB | before | ratio | wall s | label child MB, CPU s |")
    print("| --- | --- | --- | ---: | --- | ---: | ---: | ---: |")
    for case, r in results:
        ratio = _ratio(r["growth_mb"], case.before_mb)
        if case.before_mb is None:  # the issue timed it (CPU seconds); our wall time is an upper bound
            ratio = _ratio(r["seconds"], case.before_s) + " (time)"
        child = f"{r['child_peak_mb']:.0f}, {r['child_cpu_s']:.1f}" if r["child_cpu_s"] > 0.001 else "-"
        answer = f"{r['status']} {r['answer']}".replace("|", "/")
        print(f"| {case.what} ({sizes[case.name]:,} B) | {case.door} | {answer} | {r['growth_mb']:.2f} | "
              f"{case.before} | {ratio} | {r['seconds']:.2f} | {child} |")  # fmt: skip


def _size(path: str) -> int:
    """A file's size; a folder's largest file (each hostile folder's hostile file is its largest)."""
    path = Path(path)
    return max(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=[case.name for case in CASES], help="(internal) run one case")
    parser.add_argument("--files", help="(internal) the files' JSON")
    parser.add_argument("--make-files", nargs=2, type=Path, help="(internal) make them in these two folders")
    parser.add_argument("--only", nargs="*", default=None, help="run only these cases")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, json.loads(args.files))))
        return
    if args.make_files:
        print(json.dumps(make_files(*args.make_files)))
        return
    work = Path(tempfile.mkdtemp(prefix="bench-hostile-"))
    try:
        data, imports, scratch = work / "data", work / "imports", work / "scratch"
        for folder in (data, imports, scratch):
            folder.mkdir()
        env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "DATABASE_URL")}
        env.update(DJANGO_SETTINGS_MODULE="workbench.settings", WORKBENCH_DATA_DIR=str(data),
                   WORKBENCH_IMPORT_ROOTS=str(imports), PYTHONPATH=str(ROOT))  # fmt: skip
        subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
        started = time.perf_counter()
        # In a process of their own: a case's process starts with the high-water mark of the
        # process it was started from (Linux keeps ru_maxrss across fork and exec), and making
        # the files takes torch and hundreds of MB of arrays.
        made = subprocess.run([sys.executable, __file__, "--make-files", imports, scratch],
                              cwd=ROOT, env=env, capture_output=True, text=True, check=True)  # fmt: skip
        files = json.loads(made.stdout.splitlines()[-1])
        print(f"made the hostile files in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        results = []
        for case in CASES:
            if args.only is not None and case.name not in args.only:
                continue
            argv = [sys.executable, __file__, "--case", case.name, "--files", json.dumps(files)]
            done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"case {case.name} failed:\n{done.stderr}")
            results.append((case, json.loads(done.stdout.splitlines()[-1])))
            print(case.name, results[-1][1], file=sys.stderr)
        print_table(results, {name: _size(path) for name, path in files.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
