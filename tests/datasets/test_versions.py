"""Dataset versions (datasets/versions.py, the services, the API, the command, the pages): version 1
is the build with its digest; fixes make an immutable version without rebuilding; the same
images and labels have one digest whatever led to them; the leaked copies drop in one request;
runs record their version, retrain on a newer one, and keep theirs from being deleted."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from datasets.models import DatasetVersion
from datasets.services import duplicates_check_now
from tests.datasets.doctor.conftest import SIDE, distinct_images, mirrored_jpeg
from tests.support.factories import make_dataset_row
from tests.support.trainer_data import write_dataset_folder
from trainer.dataset_folder import load_dataset_folder
from trainer.versions import open_images
from workbench.audit.models import AuditEntry
from workbench.runs.models import Run
from workbench.runs.services import run_create

pytestmark = pytest.mark.django_db


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def dataset(owner):
    """Built: train 0..30 (labels alternate a, b), val 0..10; val 10 is a mirrored copy of train 7."""
    train, val = distinct_images(31, seed=1), distinct_images(10, seed=2)
    val.append(mirrored_jpeg(train[7]))
    row = make_dataset_row(owner, name="leaky", image_width=SIDE, image_height=SIDE, channels=1,
                           labels=["a", "b"], splits={"train": {"count": 31}, "val": {"count": 11}})  # fmt: skip
    as_split = lambda images: (np.stack(images)[..., None], np.arange(len(images)) % 2)  # noqa: E731
    write_dataset_folder(row.path, {"train": as_split(train), "val": as_split(val)}, ["a", "b"])
    return row


def _versions(client, dataset) -> list[dict]:
    return client.get(f"/api/datasets/{dataset.pk}/versions/").json()["results"]


def _post(client, dataset, body: dict):
    return client.post(f"/api/datasets/{dataset.pk}/versions/", body, content_type="application/json")


FIXES = [
    {"op": "drop", "split": "train", "index": 0},
    {"op": "relabel", "split": "train", "index": 2, "label": "b"},
    {"op": "move", "split": "val", "index": 1, "to": "train"},
]


def test_it_makes_a_version_from_fixes_that_the_trainer_reads_without_a_rebuild(owner, dataset):
    client = _as(owner)
    [first] = _versions(client, dataset)
    assert first["number"] == 1 and len(first["digest"]) == 32 and first["note"] == "the build"
    answer = _post(client, dataset, {"fixes": FIXES, "note": "first look"})
    assert answer.status_code == 201, answer.content
    made = answer.json()
    assert made["number"] == 2 and made["parent"] == 1 and made["digest"] != first["digest"]
    assert made["splits"] == {
        "train": {"count": 31, "class_counts": [14, 17]},
        "val": {"count": 10, "class_counts": [6, 4]},
    }
    assert made["fixes"][1] == {"op": "relabel", "split": "train", "index": 2, "label": 1}
    assert not (dataset.path / "versions" / "2" / "train_db").exists()  # nothing rebuilt
    info = load_dataset_folder(dataset.path / "versions" / "2")
    train = open_images(info.splits["train"])
    try:
        assert len(train) == 31
        assert train[1][1] == 1  # the build's train 2 (label a), relabelled b
        assert [place for place in info.splits["train"].overlay.entries[-2:]] == [("train", 30), ("val", 1)]
    finally:
        train.close()
    # The same images and labels, reached by the same fixes in another order from version 1: refused.
    again = _post(client, dataset, {"fixes": FIXES[::-1], "from": 1})
    assert again.status_code == 400
    assert again.json() == {"fixes": ["version 2 already holds exactly these images and labels"]}
    assert AuditEntry.objects.filter(action="dataset.version", actor_name=owner.username).count() == 1


@pytest.mark.parametrize(
    ("fix", "field", "words"),
    [
        ({"op": "burn", "split": "train", "index": 0}, "fixes", "0.op: 'burn' is not one of drop, relabel, move"),
        ({"op": "drop", "split": "train", "index": 99}, "fixes", "0.index: the build's train split has no image 99"),
        (
            {"op": "relabel", "split": "train", "index": 1, "label": 7},
            "fixes",
            "0.label: 7 is not one of the dataset's 2",
        ),
        ({"op": "move", "split": "val", "index": 1, "to": "val"}, "fixes", "0.to: 'val' is not another split"),
        ({"op": "drop", "split": "val", "index": -1}, "fixes", "0.index: -1 is not an image's index"),
    ],
)
def test_it_refuses_a_fix_it_cannot_make_naming_it(owner, dataset, fix, field, words):
    answer = _post(_as(owner), dataset, {"fixes": [fix]})
    assert answer.status_code == 400
    assert answer.json()[field][0].startswith(words)
    assert not DatasetVersion.objects.filter(dataset=dataset, number=2).exists()
    assert not (dataset.path / "versions" / "2").exists()


def test_it_drops_the_leaked_copies_in_one_request_and_says_when_there_are_none(owner, dataset):
    client = _as(owner)
    refused = _post(client, dataset, {"drop_leaked_copies": True})
    assert refused.json() == {"detail": ["check the dataset for duplicates first: its report lists the leaks"]}
    duplicates_check_now(dataset=dataset, by=owner)
    made = _post(client, dataset, {"drop_leaked_copies": True}).json()
    assert made["fixes"] == [{"op": "drop", "split": "train", "index": 7}]
    assert made["note"] == "dropped 1 training copies of validation and test images"
    assert made["splits"]["train"]["count"] == 30 and made["splits"]["val"]["count"] == 11
    again = _post(client, dataset, {"drop_leaked_copies": True})
    assert again.json() == {"detail": ["version 2's training split holds no copy of a validation or test image"]}


def test_it_records_the_version_on_each_run_and_retrains_on_a_newer_one(owner, dataset):
    client = _as(owner)
    body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu", "epochs": 1, "batch_size": 8}
    first = client.post("/api/runs/", body, content_type="application/json").json()
    v1 = _versions(client, dataset)[0]
    assert first["dataset_version"] == {"number": 1, "digest": v1["digest"]}
    v2 = _post(client, dataset, {"fixes": FIXES[:1]}).json()
    latest = client.post("/api/runs/", body, content_type="application/json").json()
    assert latest["dataset_version"] == {"number": 2, "digest": v2["digest"]}
    wrong = client.post("/api/runs/", {**body, "dataset_version": 9}, content_type="application/json")
    assert wrong.json() == {"dataset_version": ["dataset 'leaky' has no version 9 (its versions: 1, 2)"]}
    run = Run.objects.get(pk=first["id"])
    assert run.dataset_folder == dataset.path
    assert Run.objects.get(pk=latest["id"]).dataset_folder == dataset.path / "versions" / "2"
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f"digest {v1['digest']} (the build)" in page
    assert 'id="run-retrain"' in page and ">Retrain on v2</button>" in page
    answer = client.post(f"/runs/{run.pk}/retrain/", {"version": "2"})
    again = Run.objects.exclude(pk__in=[first["id"], latest["id"]]).get()
    assert answer.status_code == 302 and answer["Location"] == f"/runs/compare/?runs={run.pk},{again.pk}"
    assert again.dataset_version.number == 2 and again.config == run.config and again.network == "lenet"
    assert again.name == f"{run.name} (v2)"


def test_it_refuses_to_delete_the_build_and_a_version_runs_use(owner, other_user, dataset):
    client = _as(owner)
    _post(client, dataset, {"fixes": FIXES[:1]})
    _post(client, dataset, {"fixes": FIXES[1:2]})
    v2 = dataset.versions.get(number=2)
    run_create(owner=owner, dataset=dataset, name="r", network="lenet", config={}, device_request={},
               dataset_version=v2)  # fmt: skip
    build = client.delete(f"/api/datasets/{dataset.pk}/versions/1/")
    assert build.status_code == 400
    assert build.json() == {"detail": ["version 1 is the build itself: delete the dataset instead"]}
    used = client.delete(f"/api/datasets/{dataset.pk}/versions/2/")
    assert used.status_code == 409
    assert used.json() == {"detail": "1 run trained on version 2 (1 of alice); they must be deleted first"}
    assert client.delete(f"/api/datasets/{dataset.pk}/versions/3/").status_code == 204
    assert not (dataset.path / "versions" / "3").exists() and (dataset.path / "versions" / "2").is_dir()
    page = client.get(f"/datasets/{dataset.pk}/").content.decode()
    assert 'aria-label="Delete version 2"' not in page and '<tr data-version="2">' in page
    stranger = _as(other_user)
    assert stranger.get(f"/api/datasets/{dataset.pk}/versions/").status_code == 404
    assert _post(stranger, dataset, {"fixes": FIXES[:1]}).status_code == 404
    assert stranger.delete(f"/api/datasets/{dataset.pk}/versions/2/").status_code == 404


def test_it_lists_makes_and_deletes_versions_from_the_command_line(owner, dataset, tmp_path):
    fixes = tmp_path / "fixes.json"
    fixes.write_text(json.dumps(FIXES[:1]))
    out = StringIO()
    call_command("versions", dataset.pk, "--as", owner.username, "--fixes", str(fixes), "--note", "cli", stdout=out)
    assert out.getvalue().startswith("v2  ") and out.getvalue().rstrip().endswith("train 30, val 11  0 runs  cli")
    duplicates_check_now(dataset=dataset, by=owner)
    call_command("versions", dataset.pk, "--as", owner.username, "--drop-leaked-copies", stdout=StringIO())
    listing = StringIO()
    call_command("versions", dataset.pk, "--as", owner.username, stdout=listing)
    assert [line.split()[0] for line in listing.getvalue().splitlines()] == ["v1", "v2", "v3"]
    call_command("versions", dataset.pk, "--as", owner.username, "--delete", "3", stdout=StringIO())
    with pytest.raises(CommandError, match="fixes: 0.index: the build's train split has no image 99"):
        fixes.write_text(json.dumps([{"op": "drop", "split": "train", "index": 99}]))
        call_command("versions", dataset.pk, "--as", owner.username, "--fixes", str(fixes))
