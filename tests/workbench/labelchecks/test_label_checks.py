"""A label check through its doors, with its fold runs' held-out predictions written as a trained
fold run writes them (the worker's own training: test_worker_e2e.py): every image in one fold,
each class spread over the folds, the folds' folders as the trainer reads them, the suspects from
confident learning, a failed fold named, and the accepted suggestions as a new dataset version."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from django.test import Client

from tests.support.factories import make_dataset_row
from tests.workbench.labelchecks.conftest import FLIPPED
from trainer.dataset_folder import load_dataset_folder
from trainer.protocol import HELDOUT_FILE
from trainer.versions import open_images
from workbench.audit.models import AuditEntry
from workbench.labelchecks.models import LabelCheck
from workbench.runs.models import Run
from workbench.runs.services import run_delete

pytestmark = pytest.mark.django_db

BODY = {"network": "lenet", "folds": 3, "gpus": "cpu", "config": {"epochs": 1, "batch_size": 8}}


def _as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _start(client, dataset, **body):
    return client.post("/api/label-checks/", {**BODY, "dataset": dataset.pk, **body}, content_type="application/json")


def _predict_as_trained(check: LabelCheck, *, true_of) -> None:
    """Each fold run done, with the held-out predictions of a model that learnt the true labels."""
    for fold in check.fold_runs.select_related("run"):
        probabilities = np.full((len(fold.places), 3), 0.05, dtype=np.float32)
        for row, (split, index) in enumerate(fold.places):
            probabilities[row, true_of(split, index)] = 0.9
        fold.run.run_dir.mkdir(parents=True, exist_ok=True)
        np.save(fold.run.run_dir / HELDOUT_FILE, probabilities)
        Run.objects.filter(pk=fold.run.pk).update(state=Run.State.DONE)


def _true_labels(dataset):
    from trainer.datum import DatumLMDB

    labels = {}
    for split in ("train", "val"):
        db = DatumLMDB(dataset.path / f"{split}_db")
        try:
            labels[split] = [db[i][1] for i in range(len(db))]
        finally:
            db.close()
    return lambda split, index: (
        (labels[split][index] - 1) % 3 if split == "train" and index in FLIPPED else labels[split][index]
    )


def test_it_runs_folds_that_cover_every_image_once_and_ranks_the_flipped_labels_first(owner, noisy):
    client = _as(owner)
    answer = _start(client, noisy)
    assert answer.status_code == 201, answer.content
    check = LabelCheck.objects.get(pk=answer.json()["id"])
    assert answer.json()["state"] == "running" and len(answer.json()["fold_runs"]) == 3
    places = [tuple(p) for fold in check.fold_runs.all() for p in fold.places]
    assert sorted(places) == sorted([("train", i) for i in range(48)] + [("val", i) for i in range(12)])
    first = check.fold_runs.select_related("run").first()
    assert first.run.config["heldout_predictions"] is True and first.run.dataset_version.number == 1
    info = load_dataset_folder(first.run.dataset_folder)
    held = open_images(info.splits["val"])
    try:
        assert len(held) == len(first.places) and info.splits["train"].count == 60 - len(first.places)
        fold_labels = Counter(held[i][1] for i in range(len(held)))
        assert max(fold_labels.values()) - min(fold_labels.values()) <= 2  # each class spread evenly
    finally:
        held.close()

    _predict_as_trained(check, true_of=_true_labels(noisy))
    done = client.get(f"/api/label-checks/{check.pk}/").json()
    assert done["state"] == "done" and done["images"] == 60 and done["suspects_total"] == 3
    assert sorted(s["image"]["index"] for s in done["suspects"]) == sorted(FLIPPED)
    assert {(s["given"] - s["suggested"]) % 3 for s in done["suspects"]} == {1}
    page = client.get(f"/label-checks/{check.pk}/").content.decode()
    assert "<strong>3 suspect labels</strong>" in page and page.count('<img src="data:image/png;base64,') == 3

    accepted = client.post(f"/api/label-checks/{check.pk}/accept/", {"images": [["train", FLIPPED[0]]]},
                           content_type="application/json")  # fmt: skip
    assert accepted.status_code == 201, accepted.content
    assert accepted.json()["number"] == 2 and accepted.json()["note"] == f"label check {check.pk}: 1 relabelled"
    assert accepted.json()["fixes"][0]["op"] == "relabel"
    assert AuditEntry.objects.filter(action="labelcheck.start").count() == 1
    assert AuditEntry.objects.filter(action="labelcheck.done").count() == 1


def test_it_fails_the_check_naming_the_fold_whose_run_failed_and_aborts_the_rest(owner, noisy):
    client = _as(owner)
    check = LabelCheck.objects.get(pk=_start(client, noisy).json()["id"])
    failed = check.fold_runs.select_related("run").get(index=1).run
    Run.objects.filter(pk=failed.pk).update(state=Run.State.FAILED, error="out of memory")
    answer = client.get(f"/api/label-checks/{check.pk}/").json()
    assert answer["state"] == "failed" and answer["error"] == f"fold 2's run #{failed.pk} failed: out of memory"
    deleted = LabelCheck.objects.get(pk=_start(client, noisy).json()["id"])
    run_delete(run=deleted.fold_runs.get(index=0).run, by=owner)
    assert client.get(f"/api/label-checks/{deleted.pk}/").json()["error"] == "fold 1's run was deleted"
    other = LabelCheck.objects.get(pk=_start(client, noisy).json()["id"])
    aborted = client.post(f"/api/label-checks/{other.pk}/abort/").json()
    assert aborted["state"] == "aborted"
    assert {fold.run.stop_request or fold.run.state for fold in other.fold_runs.select_related("run")} <= {
        "abort",
        "aborted",
    }


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"folds": 1}, "folds", "1 is not a whole number from 2 to 10"),
        ({"folds": 40}, "folds", "40 is not a whole number from 2 to 10"),
        ({"version": 9}, "version", "dataset"),
        ({"network": "nonet"}, "network", "'nonet' is not one of lenet, alexnet"),
    ],
)
def test_it_refuses_what_it_cannot_check_naming_the_field(owner, noisy, body, field, words):
    answer = _start(_as(owner), noisy, **body)
    assert answer.status_code == 400 and field in answer.json(), answer.json()
    assert words in answer.json()[field][0]
    assert not LabelCheck.objects.exists() and not Run.objects.exists()


def test_it_refuses_a_detection_dataset_and_answers_a_stranger_404(owner, other_user, noisy):
    boxes = make_dataset_row(owner, name="boxes", task="detection", labels=["a", "b"])
    answer = _start(_as(owner), boxes)
    assert answer.json() == {
        "dataset": ["a detection dataset's boxes and masks are not checked yet: only one label per image is"]
    }
    check = LabelCheck.objects.get(pk=_start(_as(owner), noisy).json()["id"])
    stranger = _as(other_user)
    assert stranger.get(f"/api/label-checks/{check.pk}/").status_code == 404
    assert stranger.get(f"/label-checks/{check.pk}/").status_code == 404
    assert stranger.post(f"/api/label-checks/{check.pk}/abort/").status_code == 404
    assert _start(stranger, noisy).json() == {"dataset": [f"no dataset {noisy.pk} of yours"]}
