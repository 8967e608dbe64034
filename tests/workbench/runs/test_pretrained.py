"""Weights to start from: uploads and runs by reference, one rule for form, API and CLI, and one
answer for everything refused (a second user learns nothing about what exists)."""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import pytest
import torch
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from tests.support.waiting import wait_for_state
from tests.workbench.runs.conftest import TINY_CONFIG
from trainer.checkpoint import CheckpointStore
from trainer.networks import InputSpec, build_model
from workbench.runs.attempts.config import run_config
from workbench.runs.models import Run
from workbench.runs.pretrained import START_WEIGHTS
from workbench.runs.services import run_create
from workbench.weights.files import WeightsError
from workbench.weights.models import StoredWeights, UploadedWeights
from workbench.weights.references import REFUSED as PRETRAINED_REFUSED
from workbench.weights.uploads import uploads_root, weights_upload

REFUSED = f"pretrained: {PRETRAINED_REFUSED}"
SPEC = InputSpec(1, 8, 8, 3)  # what make_dataset_folder builds by default


def lenet_bytes(seed: int = 0) -> bytes:
    torch.manual_seed(seed)
    buffer = io.BytesIO()
    torch.save(build_model("lenet", SPEC).state_dict(), buffer)
    return buffer.getvalue()


def building_dataset(user, name: str = "bars") -> Dataset:
    # Never started by a worker another test may have running: its runs stay queued.
    return make_dataset_row(user, name=name, status=Dataset.Status.BUILDING)


def run_with_checkpoint(user, *, network: str = "lenet") -> Run:
    run = run_create(owner=user, dataset=building_dataset(user, "alice-secret-data"), name="alice-secret-project-x",
                     network=network, config={}, device_request={"kind": "cpu"})  # fmt: skip
    store = CheckpointStore(run.run_dir)
    store.save({"model": build_model("lenet", SPEC).state_dict(), "config": {}}, step=5, is_best=True)
    store.save({"model": build_model("lenet", SPEC).state_dict(), "config": {}}, step=9)
    return run


def submit(client, dataset, pretrained, network: str = "lenet"):
    body = {"dataset": dataset.pk, "network": network, "epochs": 1, "batch_size": 8, "gpus": "cpu",
            "config": {"pretrained": pretrained}}  # fmt: skip
    return client.post(reverse("api-runs"), body, content_type="application/json")


@pytest.fixture
def alice_run(owner):
    return run_with_checkpoint(owner)


@pytest.fixture
def alice_upload(owner):
    return weights_upload(owner=owner, name="alice.pt", chunks=io.BytesIO(lenet_bytes()))


@pytest.fixture
def bob_client(client, other_user):
    client.force_login(other_user)
    return client


def stored_files(user) -> list[Path]:
    folder = uploads_root() / f"user{user.pk}"
    return sorted(p for p in folder.glob("*") if not p.is_symlink()) if folder.is_dir() else []


# ----------------------------------------------------------------------------- refused, all alike


def hostile_values(alice_run: Run, alice_upload: UploadedWeights, symlink: Path) -> list:
    best = alice_run.run_dir / "checkpoints" / "best.pt"
    data_dir = Path(settings.DATA_DIR)
    return [
        str(best),  # another user's checkpoint, by its absolute path
        str(alice_upload.file),  # another user's upload, by its path
        f"../runs/{alice_run.pk}/checkpoints/best.pt",
        f"pretrained/../runs/{alice_run.pk}/checkpoints/best.pt",
        str(uploads_root() / ".." / "runs" / str(alice_run.pk) / "checkpoints" / "best.pt"),
        str(symlink),  # a symlink to another user's checkpoint
        "/etc/passwd",
        str(data_dir / "secret_key"),
        str(data_dir / "no-such-file.pt"),
        f"upload:{alice_upload.pk}",  # another user's upload, by id
        f"run:{alice_run.pk}",  # another user's run, by id
        f"run:{alice_run.pk}:last",
        "upload:999999",
        "run:999999",
        f"upload:{alice_upload.pk}\n",
        "upload:0",
        5,
        ["/etc/passwd"],
        {"path": "/etc/passwd"},
    ]


def test_it_refuses_every_source_but_references_of_ones_own_with_one_message(
    bob_client, other_user, alice_run, alice_upload
):
    dataset = building_dataset(other_user)
    before = stored_files(other_user)
    symlink = uploads_root() / f"user{other_user.pk}" / "link.pt"
    symlink.parent.mkdir(parents=True, exist_ok=True)
    symlink.unlink(missing_ok=True)
    symlink.symlink_to(alice_run.run_dir / "checkpoints" / "best.pt")
    bodies = []
    for value in hostile_values(alice_run, alice_upload, symlink):
        response = submit(bob_client, dataset, value)
        assert response.status_code == 400, (value, response.content)
        bodies.append(response.json())
    assert all(body == {"config": [REFUSED]} for body in bodies), bodies
    assert "alice" not in REFUSED and "/" not in REFUSED.partition("(")[0]
    assert not Run.objects.filter(owner=other_user).exists()
    # Nothing was loaded or copied for bob: no weights of his, no file but his own symlink.
    assert not UploadedWeights.objects.filter(owner=other_user).exists()
    assert stored_files(other_user) == before


def test_it_refuses_the_same_through_the_cli(other_user, alice_run, alice_upload):
    dataset = building_dataset(other_user)
    for value in (f"run:{alice_run.pk}", f"upload:{alice_upload.pk}", "/etc/passwd", str(alice_upload.file)):
        with pytest.raises(CommandError) as caught:
            call_command("train", dataset=dataset.pk, network="lenet", epochs=1, batch_size=8, gpus="cpu",
                         pretrained=value, owner=other_user.username, stdout=io.StringIO())  # fmt: skip
        assert str(caught.value) == f"config: {REFUSED}"
    assert not Run.objects.filter(owner=other_user).exists()


def test_it_refuses_the_same_through_the_form_and_its_clone_field(bob_client, other_user, alice_run, alice_upload):
    from tests.workbench.runs.web.test_wizard import errors_of, valid

    dataset = make_dataset_row(other_user, name="bobs", image_width=8,
                                     image_height=8, channels=1, labels=["a", "b", "c"],
                                     splits={"train": {"count": 24}})  # fmt: skip
    for value in (f"run:{alice_run.pk}", f"upload:{alice_upload.pk}", "/etc/passwd", str(alice_upload.file)):
        response = bob_client.post(reverse("run-new"), valid(dataset, start_from="path", pretrained_path=value))
        assert errors_of(response)["start_from"] == REFUSED.removeprefix("pretrained: ")
    assert not Run.objects.filter(owner=other_user).exists()


def test_it_refuses_an_upload_row_whose_file_was_swapped_for_a_symlink(owner_client, owner, alice_run, alice_upload):
    alice_upload.file.unlink()
    os.symlink("/etc/passwd", alice_upload.file)
    response = submit(owner_client, building_dataset(owner, "other"), f"upload:{alice_upload.pk}")
    assert response.json() == {"config": [REFUSED]}


# ----------------------------------------------------------------------------- one's own, accepted


def test_it_starts_from_ones_own_upload_and_shows_the_reference_not_the_path(owner_client, owner, alice_upload):
    response = submit(owner_client, building_dataset(owner, "mine"), f"upload:{alice_upload.pk}")
    assert response.status_code == 201, response.json()
    assert response.json()["config"]["pretrained"] == f"upload:{alice_upload.pk}"
    run = Run.objects.get(pk=response.json()["id"])
    assert run.config["pretrained"] == f"upload:{alice_upload.pk}"  # the reference is stored
    assert run_config(run)["pretrained"] == str(alice_upload.file)  # the file, resolved at launch
    detail = owner_client.get(reverse("api-run", args=[run.pk])).json()
    assert detail["config"]["pretrained"] == f"upload:{alice_upload.pk}" and settings.DATA_DIR.name not in str(detail)


def test_it_starts_from_ones_own_runs_best_or_last_checkpoint(owner_client, owner, alice_run):
    dataset = building_dataset(owner, "mine")
    best = CheckpointStore.load(alice_run.run_dir / "checkpoints" / "best.pt")["model"]
    for reference in (f"run:{alice_run.pk}", f"run:{alice_run.pk}:last"):
        response = submit(owner_client, dataset, reference)
        assert response.status_code == 201, response.json()
        assert response.json()["config"]["pretrained"] == reference
        run = Run.objects.get(pk=response.json()["id"])
        assert run.config["pretrained"] == reference and not (run.run_dir / START_WEIGHTS).exists()
        launched = run_config(run)["pretrained"]  # copied at launch into the run's own folder
        assert launched == str(run.run_dir / START_WEIGHTS)
        assert torch.load(launched, weights_only=True).keys() == best.keys()
    assert submit(owner_client, dataset, f"run:{alice_run.pk}", network="resnet18").json() == {
        "config": [f"pretrained: run #{alice_run.pk} trained a lenet; choose network lenet to start from its weights"]
    }


def test_it_lets_staff_start_from_a_run_they_can_see(client, staff_user, alice_run):
    client.force_login(staff_user)
    response = submit(client, building_dataset(staff_user), f"run:{alice_run.pk}")
    assert response.status_code == 201, response.json()


# ----------------------------------------------------------------------------- fine-tuning, told


def epochs_run(user, name: str, state: str, epochs: tuple[float, float]) -> Run:
    """A run of `user` in `state`, its best checkpoint at epochs[0] and its latest at epochs[1]."""
    run = run_create(owner=user, dataset=building_dataset(user, f"{name}-data"), name=name, network="lenet",
                     config={}, device_request={"kind": "cpu"})  # fmt: skip
    store = CheckpointStore(run.run_dir)
    for step, epoch in enumerate(epochs, start=1):
        state_dict = {"model": build_model("lenet", SPEC).state_dict(), "epoch": epoch, "config": {}}
        store.save(state_dict, step=step, is_best=step == 1, metrics={"epoch": epoch})
    Run.objects.filter(pk=run.pk).update(state=state)
    run.refresh_from_db()
    return run


def test_it_lists_finished_runs_first_and_a_running_one_as_its_latest_snapshot(owner_client, owner):
    from tests.workbench.runs.web.test_wizard import valid

    done = epochs_run(owner, "finished-one", Run.State.DONE, (8, 10))
    running = epochs_run(owner, "still-going", Run.State.RUNNING, (2, 3))  # newer: listed first before
    form = owner_client.get(reverse("run-new")).context["form"]
    choices = [label for value, label in form.fields["previous_run"].choices if value]
    assert choices == [
        f"#{done.pk} finished-one (lenet, done: best checkpoint, epoch 8)",
        f"#{running.pk} still-going (lenet, running — its latest snapshot, epoch 3)",
    ]
    dataset = make_dataset_row(owner, name="mine", image_width=8,
                                     image_height=8, channels=1, labels=["a", "b", "c"],
                                     splits={"train": {"count": 24}})  # fmt: skip
    response = owner_client.post(reverse("run-new"), valid(dataset, start_from="run", previous_run=str(running.pk)))
    assert response.status_code == 302, response.context["form"].errors
    tuned = Run.objects.exclude(pk__in=(done.pk, running.pk)).get(dataset=dataset)
    page = owner_client.get(reverse("run-detail", args=[tuned.pk])).content.decode()
    url = reverse("run-detail", args=[running.pk])
    link = f"<a href=\"{url}\">run #{running.pk} 'still-going'</a>"
    assert f"Fine-tuned from {link}, epoch 3 (latest snapshot)" in page
    assert settings.DATA_DIR.name not in page and "pretrained/" not in page


def test_it_names_the_source_on_the_run_page_never_its_path(owner_client, owner, alice_upload):
    done = epochs_run(owner, "finished-one", Run.State.DONE, (8, 10))
    pages = {}
    for reference in (f"run:{done.pk}", f"upload:{alice_upload.pk}"):
        response = submit(owner_client, building_dataset(owner, f"mine-{len(pages)}"), reference)
        assert response.status_code == 201, response.json()
        pages[reference] = owner_client.get(reverse("run-detail", args=[response.json()["id"]])).content.decode()
    url = reverse("run-detail", args=[done.pk])
    link = f"<a href=\"{url}\">run #{done.pk} 'finished-one'</a>"
    assert f"Fine-tuned from {link}, epoch 8 (best)" in pages[f"run:{done.pk}"]
    assert "Fine-tuned from uploaded weights 'alice.pt'" in pages[f"upload:{alice_upload.pk}"]
    assert all(settings.DATA_DIR.name not in page for page in pages.values())

    # The weights store's (weights:<id>): by network and label, never by the file's path.
    stored = StoredWeights.objects.create(
        network="lenet", source="torchvision", tag="IMAGENET1K_V1", file_name="lenet.pth",
        path=str(alice_upload.file), dataset="ImageNet-1k", verified=True,
    )  # fmt: skip
    Run.objects.filter(pk=done.pk).update(config={"pretrained": stored.reference})
    page = owner_client.get(reverse("run-detail", args=[done.pk])).content.decode()
    label = f"lenet, ImageNet-1k (torchvision IMAGENET1K_V1), weights:{stored.pk}"
    assert f"Fine-tuned from stored weights: {label}" in page and settings.DATA_DIR.name not in page


# ----------------------------------------------------------------------------- the upload endpoint


class RunsCode:
    """A pickle that would run code on load: weights_only refuses it."""

    def __reduce__(self):
        return (os.system, ("touch pwned-by-pickle",))


def test_it_takes_uploads_of_state_dicts_only_and_lists_ones_own(owner_client, owner, other_user):
    url = reverse("api-pretrained")
    before = len(stored_files(owner))
    good = SimpleUploadedFile("weights.pt", lenet_bytes())
    response = owner_client.post(url, {"file": good})
    assert response.status_code == 201, response.json()
    assert response.json()["reference"] == f"upload:{response.json()['id']}"
    weights = UploadedWeights.objects.get()
    assert weights.owner == owner and weights.file.is_relative_to(uploads_root()) and weights.file.is_file()

    evil = io.BytesIO()
    torch.save({"w": RunsCode()}, evil)
    cases = [("junk.pt", b"not a pickle", "junk.pt is not a PyTorch state_dict file"),
             ("evil.pt", evil.getvalue(), "evil.pt holds pickled code, not only tensors; refused"),
             ("list.pt", _saved([torch.zeros(1)]), "list.pt does not hold a state_dict")]  # fmt: skip
    for name, content, message in cases:
        response = owner_client.post(url, {"file": SimpleUploadedFile(name, content)})
        assert response.status_code == 400 and message in response.json()["file"][0], response.json()
    assert not Path("pwned-by-pickle").exists()
    assert UploadedWeights.objects.count() == 1 and len(stored_files(owner)) == before + 1

    assert [row["id"] for row in owner_client.get(url).json()["results"]] == [weights.pk]
    bob_client = Client()
    bob_client.force_login(other_user)
    assert bob_client.get(url).json()["results"] == []
    assert bob_client.delete(reverse("api-pretrained-detail", args=[weights.pk])).status_code == 404


def test_it_reads_an_upload_in_a_child_process_not_the_web_process(owner, monkeypatch):
    # A valid upload's tensors (up to 2 GiB) were loaded into the web process that checked it
    # (issue 33). The reader is the trainer's one (python -m trainer.weights_file) in a child now:
    # this process's reader, made to fail, is never called, and the upload is filed.
    import trainer.weights_file

    def not_here(*args, **kwargs):
        raise AssertionError("the web process read the weights itself")

    monkeypatch.setattr(trainer.weights_file, "read_weights", not_here)
    uploaded = weights_upload(owner=owner, name="lenet.pt", chunks=io.BytesIO(lenet_bytes()))
    assert uploaded.file.is_file() and uploaded.name == "lenet.pt"
    with pytest.raises(WeightsError, match="^junk.pt is not a PyTorch state_dict file"):
        weights_upload(owner=owner, name="junk.pt", chunks=io.BytesIO(b"not a pickle"))


def _saved(value) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def test_it_keeps_an_upload_a_pending_run_starts_from(owner_client, owner, alice_upload):
    assert submit(owner_client, building_dataset(owner, "mine"), f"upload:{alice_upload.pk}").status_code == 201
    response = owner_client.delete(reverse("api-pretrained-detail", args=[alice_upload.pk]))
    assert response.status_code == 409 and alice_upload.file.is_file()


# ----------------------------------------------------------------------------- real training


@pytest.mark.slow
def test_it_trains_from_an_uploaded_state_dict_and_then_from_that_run(
    celery_worker, transactional_db, owner, client, make_dataset
):
    client.force_login(owner)
    dataset = make_dataset(owner)
    upload = client.post(reverse("api-pretrained"), {"file": SimpleUploadedFile("w.pt", lenet_bytes(seed=7))}).json()
    runs = []
    for reference in (upload["reference"], None):
        reference = reference or f"run:{runs[0].pk}"
        body = {"dataset": dataset.pk, "network": "lenet", "gpus": "cpu",
                "config": {**TINY_CONFIG, "pretrained": reference}}  # fmt: skip
        response = client.post(reverse("api-runs"), body, content_type="application/json")
        assert response.status_code == 201, response.json()
        run = wait_for_state(Run.objects.get(pk=response.json()["id"]), Run.State.DONE, Run.State.FAILED)
        assert run.state == Run.State.DONE, run.error
        assert run.config["pretrained"] == reference  # the reference stored; the file resolved at launch
        lines = [event.data.get("line", "") for event in run.events.filter(kind="log")]
        tensors = len(build_model("lenet", SPEC).state_dict())
        assert any(f": loaded {tensors} tensors, skipped 0" in line for line in lines), lines
        runs.append(run)


@pytest.fixture(scope="module")
def weights_bomb(tmp_path_factory) -> Path:
    """A torch.save file (a zip) with one more record: 1 GiB of zeros deflated to about 1 MB."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.pt"
    torch.save({"w": torch.zeros(2)}, path)
    with zipfile.ZipFile(path, "a") as archive:
        info = zipfile.ZipInfo("bomb/data/1")
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as record:
            zeros = bytes(1 << 24)
            for _ in range(64):
                record.write(zeros)
    return path


@pytest.mark.django_db
def test_it_refuses_weights_that_inflate_far_beyond_their_size_before_loading_them(owner, weights_bomb):
    assert weights_bomb.stat().st_size < 2 * 1024**2
    started = time.monotonic()
    with weights_bomb.open("rb") as handle, pytest.raises(WeightsError) as refused:
        weights_upload(owner=owner, name="bomb.pt", chunks=handle)
    assert time.monotonic() - started < 5
    assert str(refused.value).startswith("bomb.pt: record 'bomb/data/1' inflates")
    assert "over the ratio of 10 " in str(refused.value)
    assert not UploadedWeights.objects.exists()


def test_it_takes_safetensors_and_refuses_a_padded_bomb_through_the_api_and_the_form(owner_client, dataset, tmp_path):
    from tests.support.weights_files import padded_bomb, save_safetensors
    from tests.workbench.runs.web.test_wizard import errors_of, valid

    state = build_model("lenet", SPEC).state_dict()
    safetensors = save_safetensors(state, tmp_path / "lenet.safetensors").read_bytes()
    bomb = padded_bomb(state, tmp_path / "bomb.pt").read_bytes()

    response = owner_client.post(
        reverse("api-pretrained"), {"file": SimpleUploadedFile("lenet.safetensors", safetensors)}
    )
    assert response.status_code == 201, response.json()
    response = owner_client.post(reverse("api-pretrained"), {"file": SimpleUploadedFile("bomb.pt", bomb)})
    assert response.status_code == 400
    assert response.json()["file"][0].startswith("bomb.pt: record 'archive/data/bomb' inflates")

    form = valid(dataset, start_from="upload", pretrained_file=SimpleUploadedFile("lenet.safetensors", safetensors))
    response = owner_client.post(reverse("run-new"), form)
    assert response.status_code == 302, errors_of(response)
    form = valid(dataset, start_from="upload", pretrained_file=SimpleUploadedFile("bomb.pt", bomb))
    response = owner_client.post(reverse("run-new"), form)
    assert errors_of(response)["pretrained_file"].startswith("bomb.pt: record 'archive/data/bomb' inflates")
    assert UploadedWeights.objects.count() == 2 and Run.objects.count() == 1
