"""Fixtures and small builders for the datasets tests: real images (Pillow), real archives,
real LMDBs, and an import root that the web app, the worker and daphne all allow."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings
from PIL import Image

# The worker and daphne started by tests/conftest.py inherit this environment, so they allow the
# same import root as this process (whose settings are patched by the `import_root` fixture).
IMPORT_ROOT = Path(settings.DATA_DIR) / "import-root"
IMPORT_ROOT.mkdir(parents=True, exist_ok=True)
os.environ["WORKBENCH_IMPORT_ROOTS"] = str(IMPORT_ROOT)


@pytest.fixture(autouse=True)
def import_root(settings, tmp_path_factory) -> Path:
    """A fresh folder inside the allowed import root, for this test's sources."""
    settings.IMPORT_ROOTS = [IMPORT_ROOT]
    folder = Path(tmp_path_factory.mktemp("src", numbered=True))
    target = IMPORT_ROOT / folder.name
    target.mkdir(parents=True, exist_ok=True)
    return target


def image_bytes(size=(12, 10), color=(200, 30, 30), fmt="PNG", mode="RGB") -> bytes:
    image = Image.new(mode, size, color)
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def noise_image(size=(12, 10), seed=0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8))


def make_class_folders(root: Path, classes: dict[str, int], *, size=(12, 10), fmt="PNG") -> Path:
    """root/<class>/<i>.<ext> with solid-colour images, one colour per class."""
    root.mkdir(parents=True, exist_ok=True)
    ext = "png" if fmt == "PNG" else "jpg"
    for index, (name, count) in enumerate(classes.items()):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        color = (40 * index % 256, 255 - 40 * index % 256, 100)
        for i in range(count):
            Image.new("RGB", size, color).save(folder / f"img_{i}.{ext}", format=fmt)
    return root


def zip_folder(folder: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, path.relative_to(folder.parent))
    return archive


def tar_folder(folder: Path, archive: Path, mode: str = "w:gz") -> Path:
    with tarfile.open(archive, mode) as tf:
        tf.add(folder, arcname=folder.name)
    return archive


def sklearn_digits_folders(root: Path, per_class: int | None = None) -> Path:
    """scikit-learn's digits exported as PNG class folders (8x8 gray, 0..16 scaled to 0..255)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    counts: dict[int, int] = {}
    for pixels, target in zip(digits.images, digits.target, strict=True):
        n = counts.get(int(target), 0)
        if per_class is not None and n >= per_class:
            continue
        counts[int(target)] = n + 1
        folder = root / str(int(target))
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((pixels * 255 / 16).astype(np.uint8), mode="L").save(folder / f"{n:04d}.png")
    return root


@pytest.fixture(autouse=True)
def _fresh_datasets_dir():
    """Rolled-back tests reuse primary keys; start each test without older datasets and uploads."""
    import shutil

    shutil.rmtree(Path(settings.DATA_DIR) / "datasets", ignore_errors=True)
    uploads = Path(settings.DATA_DIR) / "uploads"
    for user_dir in uploads.glob("[0-9]*"):
        shutil.rmtree(user_dir, ignore_errors=True)
