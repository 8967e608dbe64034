"""Through the real queue: the API queues, a real Celery worker (threads pool) builds with worker
processes, the dashboard group hears the progress, the CLI waits, and a cancel stops a build."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.management import call_command
from django.utils import timezone

from datasets.models import Dataset
from tests.datasets.conftest import make_class_folders, noise_image
from tests.support.waiting import wait_for_state, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _drain(layer, channel: str) -> list[dict]:
    async def receive_all():
        import asyncio

        messages = []
        while True:
            try:
                messages.append(await asyncio.wait_for(layer.receive(channel), timeout=0.5))
            except TimeoutError:
                return messages

    return async_to_sync(receive_all)()


def test_it_builds_through_the_worker_and_tells_the_dashboard(celery_worker, owner, client, import_root):
    client.force_login(owner)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(f"user-{owner.pk}", channel)
    # 80 images: above the in-process threshold, so the worker task starts build processes.
    root = make_class_folders(import_root / "queued", {"a": 40, "b": 40}, size=(30, 20), fmt="JPEG")
    response = client.post(
        "/api/datasets/",
        {"name": "q", "source_path": str(root), "image_width": 16, "image_height": 16, "val_percent": 25},
        content_type="application/json",
    )
    assert response.status_code == 201, response.json()
    dataset = wait_for_state(
        Dataset.objects.get(pk=response.json()["id"]), "ready", "failed", field="status", timeout=90
    )
    assert dataset.status == "ready", dataset.error
    assert dataset.splits["train"]["class_counts"] == [30, 30]
    assert dataset.path.joinpath("train_db", "data.mdb").is_file()
    updates = [m["payload"] for m in _drain(layer, channel) if m["type"] == "dashboard.update"]
    assert {"kind": "dataset", "id": dataset.pk, "status": "ready", "percent": 100.0} in updates
    assert any(u["status"] == "building" for u in updates)
    # Version 1, and the duplicates check no one asked for: the leak report is there before a run.
    assert dataset.versions.get().number == 1 and len(dataset.versions.get().digest) == 32
    state = lambda: client.get(f"/api/datasets/{dataset.pk}/duplicates/").json()  # noqa: E731
    wait_until(lambda: state()["state"] == "done", what=lambda: f"the check after the build: {state()}", timeout=60)
    assert state()["report"]["leaks"] > 0  # one solid colour per class: every image is a copy


def test_it_waits_for_the_worker_from_the_command_line(celery_worker, owner, import_root):
    root = make_class_folders(import_root / "cli", {"x": 3, "y": 3})
    out = io.StringIO()
    call_command(
        "import_dataset",
        str(root),
        "--name",
        "cli",
        "--owner",
        owner.username,
        "--image-size",
        "8x8",
        "--val-percent",
        "0",
        "--wait",
        "--timeout",
        "90",
        stdout=out,
        stderr=io.StringIO(),
    )
    assert out.getvalue().splitlines()[-1].split() == ["total", "6"]


def test_it_cancels_a_running_build_and_leaves_nothing(celery_worker, owner, client, import_root):
    from django.conf import settings

    client.force_login(owner)
    # 2,000 copies of one noisy photo-sized JPEG into 256x256 PNGs: many seconds of work on 2 cores.
    buf = io.BytesIO()
    noise_image((400, 300)).save(buf, format="JPEG", quality=90)
    root = import_root / "big"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(1000):
            (root / name / f"{i}.jpg").write_bytes(buf.getvalue())
    pk = client.post(
        "/api/datasets/",
        {"name": "big", "source_path": str(root), "image_width": 256, "image_height": 256, "encoding": "png"},
        content_type="application/json",
    ).json()["id"]
    wait_until(lambda: Dataset.objects.get(pk=pk).progress_done, what="the build to report progress", timeout=60)
    live = client.get(f"/api/datasets/{pk}/").json()
    assert live["status"] == "building"
    progress = live["progress"]
    assert progress["total"] == 2000 and 0 < progress["done"] < 2000 and 0 < progress["percent"] < 100
    assert progress["images_per_second"] > 0 and progress["eta_seconds"] > 0
    page = client.get(f"/datasets/{pk}/").content.decode()
    assert 'id="build-progress"' in page and "Cancel build" in page
    response = client.post(f"/api/datasets/{pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    # The build loop notices within about half a second, stops its processes, removes its temp folder.
    root_dir = settings.DATA_DIR / "datasets"
    wait_until(
        lambda: not any(p.name.startswith(f".{pk}.") for p in root_dir.iterdir()),
        what="the cancelled build to remove its temp folder",
        timeout=30,
    )
    dataset = Dataset.objects.get(pk=pk)
    assert dataset.status == "cancelled" and dataset.progress_done < 2000
    assert not dataset.path.exists()


def _orphan(owner, import_root, *, attempts: int, host_seen_ago: timedelta, same_boot: bool) -> Dataset:
    """A build as a worker leaves it when it dies mid-way: building, owned by that worker's
    process, with a half-written temp folder beside the final one."""
    import uuid

    from datasets.building import datasets_root
    from datasets.services import dataset_create
    from workbench.workers.models import WorkerHost

    root = make_class_folders(import_root / f"orphan{attempts}", {"a": 4, "b": 4})
    options = {"image_width": 8, "image_height": 8, "val_percent": 0}
    dataset = dataset_create(owner=owner, name="orphan", kind="folder", source={"path": str(root)}, options=options,
                             queue=False)  # fmt: skip
    host = WorkerHost.objects.create(hostname=f"gone{attempts}@gpu9", last_seen=timezone.now() - host_seen_ago)
    boot = host.boot_id if same_boot else uuid.uuid4()
    # Its row last moved when its worker was last seen: a build that still progresses is alive.
    Dataset.objects.filter(pk=dataset.pk).update(status="building", build_worker=host.hostname, build_boot_id=boot,
                                                 build_attempts=attempts, progress_done=3,
                                                 updated_at=timezone.now() - host_seen_ago)  # fmt: skip
    partial = datasets_root() / f".{dataset.pk}.building-dead{attempts}"
    partial.mkdir(parents=True)
    (partial / "data.mdb").write_bytes(b"half an LMDB")
    return dataset


def test_it_builds_again_when_the_building_worker_stops_beating(celery_worker, owner, import_root):
    from datasets.building import datasets_root
    from datasets.services import reclaim_lost_builds

    dataset = _orphan(owner, import_root, attempts=1, host_seen_ago=timedelta(hours=1), same_boot=True)
    reclaim_lost_builds()  # what every live worker's heartbeat does (the test worker's may come first)
    # Whichever reclaim won, the dead try's files went before its transaction let the other one on;
    # the new try may already have its own temp folder.
    assert not (datasets_root() / f".{dataset.pk}.building-dead1").exists()
    dataset = wait_for_state(dataset, "ready", "failed", field="status", timeout=90)
    assert dataset.status == "ready", dataset.error
    assert dataset.build_attempts == 2 and dataset.build_worker not in ("", "gone1@gpu9") and dataset.error == ""
    assert dataset.splits["train"]["class_counts"] == [4, 4]


def test_it_fails_a_build_interrupted_too_often_and_says_why(owner, import_root):
    from datasets.building import datasets_root
    from datasets.services import BUILD_MAX_ATTEMPTS, reclaim_lost_builds

    # The worker is online, but under another boot: it restarted while building.
    dataset = _orphan(owner, import_root, attempts=BUILD_MAX_ATTEMPTS, host_seen_ago=timedelta(0), same_boot=False)
    reclaim_lost_builds()
    dataset.refresh_from_db()
    assert dataset.status == "failed"
    assert dataset.error == (f"The build was interrupted {BUILD_MAX_ATTEMPTS} times; the last time worker "
                             f"gone{BUILD_MAX_ATTEMPTS}@gpu9 restarted. Rebuild to try again.")  # fmt: skip
    assert not list(datasets_root().glob(f".{dataset.pk}.*"))


def test_it_leaves_a_live_workers_build_alone(owner, import_root):
    from datasets.building import datasets_root
    from datasets.services import reclaim_lost_builds

    dataset = _orphan(owner, import_root, attempts=1, host_seen_ago=timedelta(0), same_boot=True)
    reclaim_lost_builds()
    dataset.refresh_from_db()
    assert dataset.status == "building" and dataset.progress_done == 3
    assert list(datasets_root().glob(f".{dataset.pk}.building-*"))


def test_it_leaves_a_build_that_progresses_alone_while_its_workers_beat_is_late(owner, import_root):
    from datasets.services import reclaim_lost_builds

    # Its worker's last beat is an hour old (all its cores busy), but the build wrote its progress now.
    dataset = _orphan(owner, import_root, attempts=1, host_seen_ago=timedelta(hours=1), same_boot=True)
    Dataset.objects.filter(pk=dataset.pk).update(progress_done=4, updated_at=timezone.now())
    assert reclaim_lost_builds() == 0
    dataset.refresh_from_db()
    assert dataset.status == "building" and dataset.build_attempts == 1


def test_it_keeps_a_replaced_try_from_writing_the_row(owner, import_root):
    from datasets.building import _fail, _stopped

    # Try 1 was declared lost and try 2 builds now: try 1, if it wakes up, sees itself stopped.
    dataset = _orphan(owner, import_root, attempts=2, host_seen_ago=timedelta(0), same_boot=True)
    assert _stopped(dataset.pk, 1) and not _stopped(dataset.pk, 2)
    _fail(dataset.pk, 1, "a late error of try 1")
    dataset.refresh_from_db()
    assert dataset.status == "building" and dataset.error == ""
