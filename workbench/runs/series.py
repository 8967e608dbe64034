"""A run's metric series: read from RunEvent rows, cut to a range, downsampled for charts.

Every series point carries all four x coordinates (step, epoch, wall time, images seen), so a page
switches its x axis without asking again and runs with different batch sizes compare fairly.

Reading is one indexed query (the (run, seq) unique index) for the events not read yet: the
columns of recently viewed runs stay in this process, so 200 viewers of one run, a zoom, or a
reconnecting socket cost a query for the new rows only. Events are append-only with gapless
sequence numbers committed in order, which is what makes the incremental read exact.

Downsampling keeps, in each of up to `points / 2` buckets, the lowest and the highest value
(bucketed min/max, as M4 does without the first/last): a spike of one step survives at any zoom.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import TextField
from django.db.models.functions import Cast

from trainer import protocol
from workbench.runs.models import Run, RunEvent

log = logging.getLogger(__name__)

SERIES_KINDS = (protocol.METRICS, protocol.VALIDATION, protocol.SYSTEM)
X_AXES = ("step", "epoch", "time", "images")
MAX_POINTS = 2000
# Fields of an event that are coordinates or bookkeeping, not series of their own.
COORDINATES = {"seq", "type", "time", "step", "epoch", "images_seen", "source"}
CACHED_RUNS = 16


def flatten(data: dict) -> dict[str, float]:
    """The numeric fields of one event: {"loss": 0.3, "gpu0_utilization_percent": 97.0, ...}.

    Lists of per-device dicts (`gpus`) become `gpu<index>_<field>`; booleans, strings and the
    coordinates are left out. The one home of the rule: pages get system events flat (event_payload).
    """
    values: dict[str, float] = {}
    for key, value in data.items():
        if key in COORDINATES:
            continue
        if key == "gpus" and isinstance(value, list):
            for device in value:
                if not isinstance(device, dict):
                    continue
                index = device.get("index", 0)
                for name, number in device.items():
                    if name != "index" and _is_number(number):
                        values[f"gpu{index}_{name}"] = float(number)
        elif _is_number(value):
            values[key] = float(value)
    return values


def event_payload(event: RunEvent) -> dict:
    """The neutral shape every client receives: {seq, type, time, step, epoch, ...fields}; a
    system sample's fields already flat, so the pages chart them as they come."""
    fields = flatten(event.data) if event.kind == protocol.SYSTEM else event.data
    return {
        "seq": event.seq,
        "type": event.kind,
        "time": event.time,
        "step": event.step,
        "epoch": event.epoch,
        **fields,
    }


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class KindColumns:
    """The events of one kind as numpy columns: the coordinates and one column per field.

    Rows arrive in chunks of columns (`extend`) that join the arrays in `flush()`, once per read,
    so a long series is converted once and then only grows by its tail.
    """

    AXES = ("seq", *X_AXES)

    def __init__(self) -> None:
        self.count = 0
        self.arrays: dict[str, np.ndarray] = {
            axis: np.empty(0, np.int64 if axis == "seq" else np.float64) for axis in self.AXES
        }
        self.values: dict[str, np.ndarray] = {}
        self._chunks: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []

    def extend(self, coordinates: dict[str, np.ndarray], values: dict[str, np.ndarray]) -> None:
        self._chunks.append((coordinates, values))

    def flush(self) -> None:
        if not self._chunks:
            return
        lengths = [len(coordinates["seq"]) for coordinates, _ in self._chunks]
        for axis in self.AXES:
            self.arrays[axis] = np.concatenate([self.arrays[axis], *(c[axis] for c, _ in self._chunks)])
        names = set(self.values).union(*(values for _, values in self._chunks))
        for name in names:
            parts = [self.values.get(name, np.full(self.count, np.nan))]
            for (_, values), length in zip(self._chunks, lengths, strict=True):
                parts.append(values.get(name, np.full(length, np.nan)))
            self.values[name] = np.concatenate(parts)
        self.count += sum(lengths)
        self._chunks = []


def _floats(values: list) -> np.ndarray:
    """Numbers as float64; None, strings, booleans and non-finite values as NaN."""
    array = np.array([v if type(v) is float or type(v) is int else math.nan for v in values], np.float64)
    array[~np.isfinite(array)] = np.nan
    return array


@dataclass
class RunColumns:
    run_id: int
    created: float
    last_seq: int = 0
    saved_seq: int = 0
    # Images per step from the latest metrics event: validation events carry only the step.
    images_per_step: float | None = None
    kinds: dict[str, KindColumns] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def names(self) -> dict[str, str]:
        """Series name -> kind, for every series this run has."""
        return {name: kind for kind, columns in self.kinds.items() for name in columns.values}

    def add_rows(self, rows: list[tuple]) -> None:
        """Rows (kind, seq, step, epoch, time, data as JSON text) in sequence order, as columns."""
        by_kind: dict[str, list[tuple]] = {}
        for row in rows:
            by_kind.setdefault(row[0], []).append(row)
        # Metrics first: their images per step give the other kinds their images coordinate.
        for kind in sorted(by_kind, key=lambda k: k != protocol.METRICS):
            self._add_kind(kind, by_kind[kind])
        self.last_seq = rows[-1][1]

    def _add_kind(self, kind: str, rows: list[tuple]) -> None:
        texts = [row[5] for row in rows]
        if all(isinstance(text, str) for text in texts):
            # One decode of the whole chunk as a JSON array: the per-call overhead of json.loads
            # was as large as the parsing itself (0.56 s against 0.32 s for 200,000 events).
            datas = json.loads(f"[{','.join(texts)}]")
            if len(datas) != len(rows):  # a stored text that was not exactly one JSON value
                datas = [json.loads(text) for text in texts]
        else:
            datas = [json.loads(text) if isinstance(text, str) else text for text in texts]
        fields = [flatten(data) for data in datas] if kind == protocol.SYSTEM else datas
        coordinates = {
            "seq": np.array([row[1] for row in rows], np.int64),
            "step": _floats([row[2] for row in rows]),
            "epoch": _floats([row[3] for row in rows]),
            "time": _floats([row[4] for row in rows]),
        }
        images = _floats([data.get("images_seen") for data in datas])
        if kind == protocol.METRICS:
            known = np.flatnonzero(~np.isnan(images) & (coordinates["step"] > 0))
            if len(known):
                self.images_per_step = images[known[-1]] / coordinates["step"][known[-1]]
        missing = np.isnan(images)
        if missing.any() and self.images_per_step is not None:
            images[missing] = coordinates["step"][missing] * self.images_per_step
        coordinates["images"] = images
        names: set[str] = set()
        for data in fields:
            names.update(data)
        values = {}
        for name in names - COORDINATES:
            column = _floats([data.get(name) for data in fields])
            if not np.isnan(column).all():
                values[name] = column
        columns = self.kinds.get(kind)
        if columns is None:
            columns = self.kinds[kind] = KindColumns()
        columns.extend(coordinates, values)


_cache: OrderedDict[int, RunColumns] = OrderedDict()
_cache_lock = threading.Lock()
READ_CHUNK = 20_000


def read_columns(run: Run) -> RunColumns:
    """The run's series columns, brought up to date with one query for the events not read yet.

    The JSON is read as text and decoded here (Django's per-row converters cost more than the
    decoding itself); rows become numpy columns a chunk at a time. A process that has not seen the
    run starts from the snapshot a previous read left in the run folder, if any.
    """
    created = run.created_at.timestamp()
    with _cache_lock:
        columns = _cache.get(run.pk)
        fresh = columns is None or columns.created != created
        if fresh:
            columns = _cache[run.pk] = RunColumns(run_id=run.pk, created=created)
        _cache.move_to_end(run.pk)
        while len(_cache) > CACHED_RUNS:
            _cache.popitem(last=False)
    with columns.lock:
        if fresh:
            load_snapshot(run, columns)
        rows = (
            RunEvent.objects.filter(run_id=run.pk, seq__gt=columns.last_seq, kind__in=SERIES_KINDS)
            .order_by("seq")
            .annotate(text=Cast("data", TextField()))
            .values_list("kind", "seq", "step", "epoch", "time", "text")
        )
        chunk: list[tuple] = []
        for row in rows.iterator(chunk_size=READ_CHUNK):
            chunk.append(row)
            if len(chunk) == READ_CHUNK:
                columns.add_rows(chunk)
                chunk = []
        if chunk:
            columns.add_rows(chunk)
        for kind_columns in columns.kinds.values():
            kind_columns.flush()
        if columns.last_seq - columns.saved_seq >= SNAPSHOT_ROWS:
            save_snapshot(run, columns)
    return columns


# A read that adds this many rows leaves a snapshot of the columns in the run folder: events are
# append-only, so a snapshot of the first n stays true and a new process reads only what follows.
SNAPSHOT_ROWS = 50_000
SNAPSHOT_NAME = "series-columns.npz"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def save_snapshot(run: Run, columns: RunColumns) -> None:
    arrays = {"meta": np.array([columns.created, columns.last_seq, columns.images_per_step or math.nan])}
    for kind, kind_columns in columns.kinds.items():
        if not all(_SAFE_NAME.match(name) for name in (kind, *kind_columns.values)):
            return  # a field name that is no file name: no snapshot, reads stay correct
        arrays.update({f"{kind}~axis~{axis}": kind_columns.arrays[axis] for axis in KindColumns.AXES})
        arrays.update({f"{kind}~value~{name}": values for name, values in kind_columns.values.items()})
    path = run.run_dir / SNAPSHOT_NAME
    temporary = path.with_name(f".{SNAPSHOT_NAME}.{os.getpid()}.{threading.get_ident()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with temporary.open("wb") as handle:
            np.savez(handle, **arrays)
        os.replace(temporary, path)
        columns.saved_seq = columns.last_seq
    except OSError:
        log.warning("run %s: could not write %s", run.pk, path, exc_info=True)
        temporary.unlink(missing_ok=True)


def load_snapshot(run: Run, columns: RunColumns) -> None:
    try:
        with np.load(run.run_dir / SNAPSHOT_NAME, allow_pickle=False) as data:
            created, last_seq, images_per_step = data["meta"].tolist()
            if created != columns.created:
                return  # another run that had this id (a reset database)
            kinds: dict[str, KindColumns] = {}
            for key in data.files:
                if key == "meta":
                    continue
                kind, part, name = key.split("~", 2)
                target = kinds.setdefault(kind, KindColumns())
                (target.arrays if part == "axis" else target.values)[name] = data[key]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return
    for kind_columns in kinds.values():
        kind_columns.count = len(kind_columns.arrays["seq"])
    columns.kinds = kinds
    columns.last_seq = columns.saved_seq = int(last_seq)
    columns.images_per_step = None if math.isnan(images_per_step) else images_per_step


def leave_snapshot(run: Run) -> None:
    """Brings the run's snapshot up to every stored event, for the process that writes the events
    (the worker: while a run trains, and when it ends), so that the first open of the run page
    after a daphne start reads a file and a short tail, not every row. The columns are not kept
    in this process: it reads them once per call."""
    columns = read_columns(run)
    if columns.last_seq > columns.saved_seq:
        with columns.lock:
            save_snapshot(run, columns)
    forget(run.pk)


def forget(run_id: int) -> None:
    with _cache_lock:
        _cache.pop(run_id, None)


# ------------------------------------------------------------------------------- downsampling


def minmax_indices(values: np.ndarray, points: int) -> np.ndarray:
    """Indices of at most `points` values: the first, the last, and each bucket's min and max.

    Vectorised: the whole buckets are one (buckets, size) view whose argmin/argmax come at once;
    the last, partial bucket is searched on its own (no padded copy of a long series).
    """
    count = len(values)
    if count <= points:
        return np.arange(count)
    buckets = max(1, (points - 2) // 2)
    size = math.ceil(count / buckets)
    whole = count // size
    body = values[: whole * size].reshape(whole, size)
    offsets = np.arange(whole) * size
    keep = [np.array([0, count - 1]), offsets + body.argmin(axis=1), offsets + body.argmax(axis=1)]
    if whole * size < count:
        rest = values[whole * size :]
        keep.append(np.array([whole * size + rest.argmin(), whole * size + rest.argmax()]))
    return np.unique(np.concatenate(keep))


def naive_stride_indices(count: int, points: int) -> np.ndarray:
    """Every k-th point: what a chart gets without care (peaks between strides vanish)."""
    stride = max(1, math.ceil(count / points))
    return np.arange(0, count, stride)


def series_points(
    columns: RunColumns,
    name: str,
    *,
    x: str = "step",
    start: float | None = None,
    end: float | None = None,
    points: int = MAX_POINTS,
    after_seq: int = 0,
    until_seq: int | None = None,
) -> dict | None:
    """One series in `[start, end]` on axis `x`, at most `points` points; None if the run lacks it.

    The answer is columnar and neutral: {"name", "kind", "total", "downsampled",
    "points": {"seq", "step", "epoch", "time", "images", "value"}}, NaN/missing as null.
    """
    kind = columns.names().get(name)
    if kind is None:
        return None
    with columns.lock:
        source = columns.kinds[kind]
        seq = source.arrays["seq"]
        coords = {axis: source.arrays[axis] for axis in X_AXES}
        value = source.values[name]
    # Sequence numbers ascend: the (after_seq, until_seq] window is a slice, found by bisection.
    first = int(np.searchsorted(seq, after_seq, side="right"))
    last = len(seq) if until_seq is None else int(np.searchsorted(seq, until_seq, side="right"))
    mask = np.zeros(len(seq), bool)
    mask[first:last] = ~np.isnan(value[first:last])
    axis = coords[x]
    if start is not None or end is not None:
        inside = mask & ~np.isnan(axis)
        if start is not None:
            inside &= axis >= start
        if end is not None:
            inside &= axis <= end
        mask = _widen(inside, mask, axis, start, end)
    where = np.flatnonzero(mask)
    total = len(where)
    if total > points:
        # A series on every row of its kind (the usual case) needs no gathered copy.
        contiguous = total == where[-1] - where[0] + 1
        inside = value[where[0] : where[-1] + 1] if contiguous else value[where]
        chosen = where[minmax_indices(inside, points)]
    else:
        chosen = where
    return {
        "name": name,
        "kind": kind,
        "total": total,
        "downsampled": total > points,
        "points": {
            "seq": seq[chosen].tolist(),
            **{axis: _json_floats(coords[axis][chosen]) for axis in X_AXES},
            "value": _json_floats(value[chosen]),
        },
    }


def _widen(inside: np.ndarray, valid: np.ndarray, axis: np.ndarray, start, end) -> np.ndarray:
    """The range plus the nearest valid point on each side, so lines reach the chart's edges
    (and a sparse series with no point inside still draws its line across)."""
    candidates = np.flatnonzero(valid & ~np.isnan(axis))
    widened = inside.copy()
    if start is not None:
        before = candidates[axis[candidates] < start]
        if len(before):
            widened[before[-1]] = True
    if end is not None:
        after = candidates[axis[candidates] > end]
        if len(after):
            widened[after[0]] = True
    return widened


def _json_floats(values: np.ndarray) -> list[float | None]:
    if not np.isnan(values).any():
        return values.tolist()
    return [None if math.isnan(v) else v for v in values.tolist()]


def run_series(
    run: Run,
    names: list[str] | None = None,
    *,
    x: str = "step",
    start: float | None = None,
    end: float | None = None,
    points: int = MAX_POINTS,
    after_seq: int = 0,
) -> dict:
    """Several series of one run: {"run": id, "last_seq": n, "series": {name: series_points(...)}}."""
    columns = read_columns(run)
    wanted = names if names else sorted(columns.names())
    series = {}
    for name in wanted:
        points_of = series_points(columns, name, x=x, start=start, end=end, points=points, after_seq=after_seq)
        if points_of is not None:
            series[name] = points_of
    return {"run": run.pk, "last_seq": columns.last_seq, "series": series}


def full_rows(run: Run):
    """Every series event of the run at full resolution, in order: (kind, seq, step, epoch, time, images, fields)."""
    images_per_step = None
    rows = (
        RunEvent.objects.filter(run_id=run.pk, kind__in=SERIES_KINDS)
        .order_by("seq")
        .values_list("kind", "seq", "step", "epoch", "time", "data")
    )
    for kind, seq, step, epoch, time, data in rows.iterator(chunk_size=5000):
        images = data.get("images_seen")
        if kind == protocol.METRICS and images is not None and step:
            images_per_step = images / step
        if images is None and step is not None and images_per_step is not None:
            images = step * images_per_step
        yield kind, seq, step, epoch, time, images, flatten(data)


# ------------------------------------------------------------------------------- replay

REPLAY_FULL_LIMIT = 5000  # series events; a longer replay is sent as downsampled series
LOG_TAIL = 200


def replay_message(run: Run, since: int) -> dict:
    """What a (re)connecting client misses after `since`, up to the run's last stored event.

    {"type": "replay", "since", "last_seq", "downsampled", "events": [...], "series": {...}}:
    every status event, the latest progress, the last LOG_TAIL log lines, and the series events;
    those come as themselves when few, else as downsampled columns (`series`, as run_series).
    Everything is cut at `last_seq`, read first, so live events after it fill in without a gap.
    """
    last_seq = Run.objects.values_list("last_seq", flat=True).get(pk=run.pk)
    window = RunEvent.objects.filter(run_id=run.pk, seq__gt=since, seq__lte=last_seq)
    columns = read_columns(run)
    pending = sum(_count_between(kind, since, last_seq) for kind in columns.kinds.values())
    downsampled = pending > REPLAY_FULL_LIMIT
    events = list(window.filter(kind=protocol.STATUS))
    events += list(window.filter(kind=protocol.PROGRESS).order_by("-seq")[:1])
    events += list(window.filter(kind=protocol.LOG).order_by("-seq")[:LOG_TAIL])
    series = {}
    if downsampled:
        for name in sorted(columns.names()):
            points = series_points(columns, name, after_seq=since, until_seq=last_seq)
            if points is not None and points["total"]:
                series[name] = points
    else:
        events += list(window.filter(kind__in=SERIES_KINDS))
    events.sort(key=lambda event: event.seq)
    return {
        "type": "replay",
        "since": since,
        "last_seq": last_seq,
        "downsampled": downsampled,
        "events": [event_payload(event) for event in events],
        "series": series,
    }


def _count_between(columns: KindColumns, after: int, until: int) -> int:
    seq = columns.arrays["seq"]
    return int(np.searchsorted(seq, until, side="right") - np.searchsorted(seq, after, side="right"))
