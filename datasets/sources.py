"""Where images come from: detect the kind of a source and scan it into a build plan.

Kinds: `folder` (one sub-folder per class, nested folders flattened into their class),
`archive` (the same, inside a zip/tar: extracted first by datasets.archives), `textlist`
(`path label` lines plus a labels file), `lmdb` (a Caffe Datum LMDB per split) and `digits` (a
DIGITS dataset job folder). The scan only lists files; whether a file is an image is decided by
its content when the build decodes it.

No Django here: the CLI, the task and the tests use it the same way.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from datasets.archives import archive_kind
from datasets.labels.files import LabelError, open_file, resolved_within, within_roots
from datasets.names import (
    LINK_NOT_FOLLOWED,
    NOT_UTF8,
    class_name_problem,
    escaped,
    is_utf8,
    name_lines,
    os_error_text,
    readable,
    shown_name,
)

KINDS = ("folder", "archive", "textlist", "lmdb", "digits")
SPLITS = ("train", "val", "test")
IGNORED_FOLDERS = {"__MACOSX"}  # macOS resource forks inside zips


class SourceError(ValueError):
    """The source cannot be used at all; the message names the file and the problem."""


@dataclass(frozen=True)
class SplitOptions:
    val_percent: int = 25
    test_percent: int = 0
    min_per_class: int = 2
    max_per_class: int | None = None
    seed: int = 0
    shuffle: bool = True


@dataclass
class Plan:
    """What to build: class names, (path, label) per split, and what was left out and why."""

    labels: list[str]
    splits: dict[str, list[tuple[str, int]]]
    skipped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.splits.values())


def detect_kind(path: Path) -> str:
    """Guess the kind of a source path; raises SourceError when it is none of them."""
    if not path.exists():
        raise SourceError(f"{path}: does not exist")
    if path.is_dir():
        if (path / "data.mdb").is_file():
            return "lmdb"
        if (path / "train_db" / "data.mdb").is_file():
            return "digits"
        return "folder"
    if path.name == "data.mdb":
        return "lmdb"
    if archive_kind(path):
        return "archive"
    return "textlist"


def _hidden(name: str) -> bool:
    return name.startswith(".")


def unwrap_single_folder(root: Path) -> Path:
    """An archive of `photos/cats/...` holds one wrapper folder: descend into it."""
    current = root
    for _ in range(4):
        entries = [e for e in os.scandir(current) if not _hidden(e.name) and e.name not in IGNORED_FOLDERS]
        dirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        if len(entries) == 1 and len(dirs) == 1:
            inner = Path(dirs[0].path)
            if any(e.is_dir(follow_symlinks=False) for e in os.scandir(inner)):
                current = inner
                continue
        break
    return current


def _class_files(class_dir: Path, root: Path, skipped: list[dict]) -> list[str]:
    # os.fwalk, not os.walk: a class folder swapped for a link after scan_class_folders looked at
    # it is not listed (os.walk follows its top), so the names in another folder stay unseen; the
    # build opens each file again without following any link.
    files: list[str] = []
    for dirpath, dirnames, filenames, _ in os.fwalk(class_dir, follow_symlinks=False):
        for name in sorted(dirnames):
            full = Path(dirpath) / name
            if not is_utf8(name):
                skipped.append({"path": readable(str(full.relative_to(root))), "reason": NOT_UTF8})
                dirnames.remove(name)
            elif _hidden(name) or name in IGNORED_FOLDERS:
                skipped.append({"path": str(full.relative_to(root)), "reason": "hidden folder ignored"})
                dirnames.remove(name)
            elif full.is_symlink():
                skipped.append({"path": str(full.relative_to(root)), "reason": LINK_NOT_FOLLOWED})
                dirnames.remove(name)
        dirnames.sort()
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = str(full.relative_to(root))
            if not is_utf8(name):
                skipped.append({"path": readable(rel), "reason": NOT_UTF8})
            elif _hidden(name):
                skipped.append({"path": rel, "reason": "hidden file ignored"})
            elif full.is_symlink():
                skipped.append({"path": rel, "reason": LINK_NOT_FOLLOWED})
            elif not full.is_file():
                skipped.append({"path": rel, "reason": "not a regular file"})
            else:
                files.append(str(full))
    return files


def scan_class_folders(root: Path, skipped: list[dict]) -> dict[str, list[str]]:
    """{class name: [file paths]} for a folder of class folders (unfiltered by count)."""
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder")
    classes: dict[str, list[str]] = {}
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if entry.name in IGNORED_FOLDERS:
            continue
        if not is_utf8(entry.name):  # a class name becomes a label: it must be UTF-8 text
            skipped.append({"path": readable(entry.name), "reason": NOT_UTF8})
            continue
        if _hidden(entry.name):
            skipped.append({"path": entry.name, "reason": "hidden folder or file is not a class"})
            continue
        if entry.is_dir() and (problem := class_name_problem(entry.name)) is not None:
            skipped.append({"path": escaped(entry.name), "reason": problem})
            continue
        if entry.is_symlink():
            skipped.append({"path": entry.name, "reason": LINK_NOT_FOLLOWED})
            continue
        if entry.is_dir():
            classes[entry.name] = _class_files(Path(entry.path), root, skipped)
        else:
            skipped.append({"path": entry.name, "reason": "file outside any class folder"})
    return classes


def _drop_small_classes(by_class: dict[str, list], options: SplitOptions, skipped: list[dict], where: str) -> None:
    for name in list(by_class):
        if len(by_class[name]) < options.min_per_class:
            skipped.append(
                {
                    "path": name,
                    "reason": f"class has {len(by_class[name])} files, below the minimum of {options.min_per_class}",
                }
            )
            del by_class[name]
    if len(by_class) < 2:
        found = ", ".join(repr(n) for n in by_class) or "none"
        raise SourceError(f"{where}: a classifier needs at least 2 classes with images; usable classes: {found}")


def _split_counts(n: int, options: SplitOptions, *, val: bool, test: bool) -> tuple[int, int]:
    n_val = n * options.val_percent // 100 if val else 0
    n_test = n * options.test_percent // 100 if test else 0
    while n - n_val - n_test < 1 and (n_val or n_test):  # every class keeps a training image
        if n_val >= n_test and n_val:
            n_val -= 1
        else:
            n_test -= 1
    return n_val, n_test


def split_classes(
    by_class: dict[str, list[str]],
    labels: list[str],
    options: SplitOptions,
    *,
    val_by_class: dict[str, list[str]] | None = None,
    test_by_class: dict[str, list[str]] | None = None,
) -> dict[str, list[tuple[str, int]]]:
    """Seeded per-class shuffle, max per class, then val/test carved off per class."""
    rng = random.Random(options.seed)
    splits: dict[str, list[tuple[str, int]]] = {s: [] for s in SPLITS}
    for label, name in enumerate(labels):
        files = list(by_class.get(name, []))
        if options.shuffle:
            rng.shuffle(files)
        if options.max_per_class:
            files = files[: options.max_per_class]
        n_val, n_test = _split_counts(len(files), options, val=val_by_class is None, test=test_by_class is None)
        splits["val"] += [(p, label) for p in files[:n_val]]
        splits["test"] += [(p, label) for p in files[n_val : n_val + n_test]]
        splits["train"] += [(p, label) for p in files[n_val + n_test :]]
        for split, extra in (("val", val_by_class), ("test", test_by_class)):
            if extra is not None:
                splits[split] += [(p, label) for p in extra.get(name, [])]
    for split in SPLITS:
        if options.shuffle:
            rng.shuffle(splits[split])
        else:
            splits[split].sort(key=lambda item: (item[1], item[0]))
    return {s: v for s, v in splits.items() if v}


def _check_same_classes(kind: str, other: dict[str, list[str]], labels: list[str], where: Path) -> None:
    missing = sorted(set(other) - set(labels))
    if missing:
        raise SourceError(f"{where}: the {kind} folder has classes the training folder lacks: {', '.join(missing)}")
    absent = sorted(set(labels) - set(other))
    if absent:
        raise SourceError(f"{where}: the {kind} folder has no folder for the classes: {', '.join(absent)}")


def plan_folder(
    root: Path,
    options: SplitOptions,
    *,
    val_folder: Path | None = None,
    test_folder: Path | None = None,
    display_name: str | None = None,
    allowed_roots: list[Path] | None = None,
) -> Plan:
    """`display_name` is what messages call `root` (an archive's name rather than the folder it
    was extracted into); the default is the path itself, which the user gave.

    The folders are resolved here, once, and checked against `allowed_roots` in the same step
    (datasets.labels.files.resolved_within): the build opens each planned file again from "/"
    without following a link (datasets.labels.prepare.open_image), so no link may stand above them."""
    root = resolved_within(root, allowed_roots, SourceError)
    val_folder = resolved_within(val_folder, allowed_roots, SourceError) if val_folder is not None else None
    test_folder = resolved_within(test_folder, allowed_roots, SourceError) if test_folder is not None else None
    skipped: list[dict] = []
    by_class = scan_class_folders(root, skipped)
    _drop_small_classes(by_class, options, skipped, display_name or str(root))
    labels = sorted(by_class)
    extras = {}
    for kind, folder in (("val", val_folder), ("test", test_folder)):
        if folder is not None:
            other = scan_class_folders(folder, skipped)
            other = {k: v for k, v in other.items() if v or k in by_class}
            _check_same_classes(kind, other, labels, folder)
            extras[kind] = other
    splits = split_classes(by_class, labels, options, val_by_class=extras.get("val"), test_by_class=extras.get("test"))
    return Plan(labels=labels, splits=splits, skipped=skipped)


# --------------------------------------------------------------------------------------------
# Text lists
# --------------------------------------------------------------------------------------------


def read_source_text(path: Path, what: str) -> str:
    """A labels file's or a text list's text, opened as a label reader opens a file (datasets.labels.
    files): no link followed anywhere on its way, so one swapped for a link after the form's check
    is refused by name, not read. `what` names the file in messages ("labels file", "text list")."""
    try:
        with open_file(path, path.parent) as handle:
            data = handle.read()
    except FileNotFoundError:
        raise SourceError(f"{path}: {what} not found") from None
    except LabelError as exc:  # "labels.txt: symbolic link not followed", or not a regular file
        raise SourceError(f"{what} {exc}") from None
    except OSError as exc:
        raise SourceError(f"{path}: {what} cannot be read ({os_error_text(exc)})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: {what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_labels_file(path: Path) -> list[str]:
    lines = name_lines(read_source_text(path, "labels file"))
    for number, name in enumerate(lines, start=1):
        if not name:
            raise SourceError(f"{path}: line {number} is blank; every line up to the last must name a class")
        if (problem := class_name_problem(name)) is not None:
            raise SourceError(f"{path}: line {number}: {shown_name(name)!r}: {problem}")
        if name.startswith("."):
            # The same rule as for class folders, where '.', '..' and hidden names are never classes.
            raise SourceError(f"{path}: line {number}: class name {name!r} is not allowed (it starts with '.')")
    if len(lines) != len(set(lines)):
        dupes = sorted(n for n, count in Counter(lines).items() if count > 1)  # linear, for long files
        raise SourceError(f"{path}: class names appear twice: {', '.join(dupes)}")
    if not lines:
        raise SourceError(f"{path}: no class names")
    return lines


def text_list_path(raw_path: str, base: Path, allowed_roots: list[Path] | None) -> Path | None:
    """Where a text list's line points (relative to `base`), or None outside the allowed roots.

    Made absolute and normalised only, never resolved: a link on the way is not followed by
    whoever opens it (the build, the preview), so the path as written is the one to check."""
    path = Path(os.path.normpath(base / raw_path))  # an absolute raw_path stays itself
    return path if allowed_roots is None or within_roots(path, allowed_roots) else None


def parse_text_list(
    list_path: Path, n_labels: int, *, image_folder: Path | None, allowed_roots: list[Path] | None, skipped: list[dict]
) -> list[tuple[str, int]]:
    """`path label` lines; blank and malformed lines and out-of-range labels go to `skipped`.

    Each path is only made absolute and normalised here, never resolved: the roots (resolved by
    settings) are checked on the path as written, and the build opens it from "/" without following
    a link (datasets.labels.prepare.open_image), so a named link is skipped there, by its name, as
    is a path through a linked folder. A link cannot lead out of the roots or into another folder."""
    base = (image_folder or list_path.parent).resolve()  # what the user named, as the form resolved it
    text = read_source_text(list_path, "text list")
    entries: list[tuple[str, int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        where = f"{list_path.name} line {number}"
        stripped = line.strip()
        if not stripped:
            skipped.append({"path": where, "reason": "blank line"})
            continue
        parts = stripped.rsplit(None, 1)
        if len(parts) != 2:
            skipped.append({"path": where, "reason": f"malformed line {stripped[:80]!r}: expected 'path label'"})
            continue
        raw_path, raw_label = parts
        try:
            label = int(raw_label)
        except ValueError:
            skipped.append({"path": where, "reason": f"label {raw_label[:40]!r} is not an integer"})
            continue
        if not 0 <= label < n_labels:
            skipped.append({"path": where, "reason": f"label {label} is out of range (0..{n_labels - 1})"})
            continue
        path = text_list_path(raw_path, base, allowed_roots)
        if path is None:
            skipped.append({"path": where, "reason": f"{raw_path} is outside the allowed import folders"})
            continue
        entries.append((str(path), label))
    return entries


def plan_text_lists(
    train_list: Path,
    labels_file: Path,
    options: SplitOptions,
    *,
    image_folder: Path | None = None,
    val_list: Path | None = None,
    test_list: Path | None = None,
    allowed_roots: list[Path] | None = None,
) -> Plan:
    labels = read_labels_file(labels_file)
    skipped: list[dict] = []

    def by_class(entries: list[tuple[str, int]]) -> dict[str, list[str]]:
        grouped: dict[str, list[str]] = {name: [] for name in labels}
        for path, label in entries:
            grouped[labels[label]].append(path)
        return grouped

    def parse(path: Path) -> list[tuple[str, int]]:
        return parse_text_list(
            path, len(labels), image_folder=image_folder, allowed_roots=allowed_roots, skipped=skipped
        )

    train = by_class(parse(train_list))
    val = by_class(parse(val_list)) if val_list else None
    test = by_class(parse(test_list)) if test_list else None
    # Labels are fixed by the labels file: a class below the minimum is an error, not dropped,
    # because dropping it would shift every later label.
    small = [f"{name!r} ({len(files)})" for name, files in train.items() if len(files) < options.min_per_class]
    if small:
        raise SourceError(f"{train_list}: classes with fewer than {options.min_per_class} images: {', '.join(small)}")
    if len(labels) < 2:
        raise SourceError(f"{labels_file}: a classifier needs at least 2 classes; found {len(labels)}")
    splits = split_classes(train, labels, options, val_by_class=val, test_by_class=test)
    return Plan(labels=labels, splits=splits, skipped=skipped)
