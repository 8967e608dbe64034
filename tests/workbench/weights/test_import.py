"""`manage.py weights import|list|fetch`: a file checked (tensors only, complete, the network's
shapes, the published hash) and filed, or refused in one line with nothing filed."""

from __future__ import annotations

import json
import os
import pickle
from io import StringIO

import pytest
import torch
import torchvision
from django.core.management import CommandError, call_command

from workbench.weights import catalog, services
from workbench.weights.catalog import Published
from workbench.weights.files import file_sha256
from workbench.weights.models import StoredWeights
from workbench.weights.selectors import weights_for_networks

pytestmark = pytest.mark.django_db


def weights(*args: str) -> str:
    out = StringIO()
    call_command("weights", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def published_as(monkeypatch, path, network: str = "mobilenet_v3_small") -> Published:
    """`path` as if torchvision published it: the one stand-in here, for the download.pytorch.org
    file this machine cannot fetch (the hash rule, the metadata and the names stay real)."""
    real = catalog.torchvision_published(network)[0]
    prefix = file_sha256(path)[:8]
    fake = Published(**{**real.__dict__, "hash_prefix": prefix, "file_name": f"{network}-{prefix}.pth"})
    monkeypatch.setattr(services, "published_for", lambda name: [fake] if name == network else [])
    return fake


def test_it_files_a_lab_file_as_local_unverified_and_lists_it_as_json(store, mobilenet_file):
    line = weights("import", str(mobilenet_file), "--network", "mobilenet_v3_small", "--tag", "lab v3")

    row = StoredWeights.objects.get()
    assert line.strip() == (
        f"filed as weights:{row.pk}: local weights of mobilenet_v3_small, unverified "
        "(not a file mobilenet_v3_small's library publishes)"
    )
    assert (row.source, row.verified, row.tag, row.tensor_count) == ("local", False, "lab-v3", 244)
    assert row.file.parent == store.WEIGHTS_DIR and row.file.read_bytes() == mobilenet_file.read_bytes()
    listed = json.loads(weights("list", "--format", "json"))
    assert [{k: e[k] for k in ("id", "network", "source", "verified")} for e in listed] == [
        {"id": row.pk, "network": "mobilenet_v3_small", "source": "local", "verified": False}
    ]


def test_it_files_a_published_file_as_verified_with_its_metadata(store, mobilenet_file, monkeypatch):
    fake = published_as(monkeypatch, mobilenet_file)

    line = weights("import", str(mobilenet_file), "--network", "mobilenet_v3_small")

    row = StoredWeights.objects.get()
    assert "verified against the published sha256" in line
    assert (row.source, row.tag, row.verified, row.file_name) == ("torchvision", "IMAGENET1K_V1", True, fake.file_name)
    assert row.label == "ImageNet-1k (torchvision IMAGENET1K_V1)"
    assert row.preprocessing() == {"norm_mean": [0.485, 0.456, 0.406], "norm_std": [0.229, 0.224, 0.225]}
    assert row.top1 == 67.668 and row.resize == 256 and row.crop == 224


def test_it_finds_a_published_file_dropped_into_torchvisions_cache(store, mobilenet_file, monkeypatch):
    fake = published_as(monkeypatch, mobilenet_file)
    store.TORCH_HUB_CHECKPOINTS.mkdir(parents=True)
    (store.TORCH_HUB_CHECKPOINTS / fake.file_name).write_bytes(mobilenet_file.read_bytes())

    listed = json.loads(weights("list", "--format", "json"))

    assert [(e["network"], e["source"], e["verified"], e["file"]) for e in listed] == [
        ("mobilenet_v3_small", "torchvision", True, fake.file_name)
    ]


def hub_repository(store, repository: str = "models--timm--convnext_atto.d2_in1k"):
    """The hub cache's own layout of one repository: blobs/ and snapshots/, empty."""
    folder = store.HF_HUB_CACHE / repository
    (folder / "blobs").mkdir(parents=True)
    return folder


def hub_snapshot(repository, revision: str, target) -> None:
    """snapshots/<revision>/model.safetensors, a link to `target` as the hub makes them."""
    snapshot = repository / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / "model.safetensors").symlink_to(os.path.relpath(target, snapshot))


def convnext_blob(repository):
    """convnext_atto's weights (weights=None) as a blob named by its own sha256, as the hub names them."""
    from safetensors.torch import save_file
    from timm import create_model

    made = repository / "blobs" / "made.safetensors"
    save_file(create_model("convnext_atto", pretrained=False).state_dict(), made)
    return made.rename(repository / "blobs" / file_sha256(made))


def test_it_files_timms_weights_found_in_the_hugging_face_cache_unverified_and_load_checked(store):
    repository = hub_repository(store)
    hub_snapshot(repository, "0123abcd", convnext_blob(repository))

    listed = json.loads(weights("list", "--format", "json"))

    row = StoredWeights.objects.get()
    # A blob named by its own sha256 proves nothing: whoever wrote it could hash it.
    assert [(e["network"], e["source"], e["tag"], e["verified"]) for e in listed] == [
        ("timm/convnext_atto", "timm", "convnext_atto.d2_in1k", False)
    ]
    assert row.label == "ImageNet-1k (timm convnext_atto.d2_in1k, unverified)" and row.licence == "apache-2.0"
    assert row.tensor_count > 0  # load-checked against the network
    assert row.preprocessing() == {"norm_mean": [0.485, 0.456, 0.406], "norm_std": [0.229, 0.224, 0.225]}


def test_it_files_a_fetched_hub_file_as_verified_when_its_sha256_is_the_one_the_hub_records(store, monkeypatch):
    repository = hub_repository(store)
    blob = convnext_blob(repository)

    def download(published, *, progress):  # the stand-in for the hub this machine cannot reach
        hub_snapshot(repository, "0123abcd", blob)
        return blob.name  # the hub's record: the file's sha256

    monkeypatch.setattr(services, "_download", download)
    row = services.weights_fetch(network="timm/convnext_atto", tag="convnext_atto.d2_in1k", progress=False)
    assert (row.verified, row.label) == (True, "ImageNet-1k (timm convnext_atto.d2_in1k)")

    monkeypatch.setattr(services, "_download", lambda published, *, progress: "0" * 64)
    with pytest.raises(services.WeightsError, match="not the one the hub records; not filed"):
        services.weights_fetch(network="timm/convnext_atto", tag="convnext_atto.d2_in1k", progress=False)


def test_it_files_no_text_blob_nor_a_link_leaving_the_cache_and_hides_a_link_swapped_later(store, tmp_path):
    repository = hub_repository(store)
    text = repository / "blobs" / "text"
    text.write_text("not weights, stored under its own sha256\n")
    hub_snapshot(repository, "1-text", text.rename(repository / "blobs" / file_sha256(text)))
    secret = tmp_path / "data" / "secret_key"
    secret.parent.mkdir()
    secret.write_text("django-insecure-secret")
    hub_snapshot(repository, "2-secret", secret)
    store.TORCH_HUB_CHECKPOINTS.mkdir(parents=True)
    name = catalog.torchvision_published("mobilenet_v3_small")[0].file_name
    (store.TORCH_HUB_CHECKPOINTS / name).symlink_to(secret)

    errors = StringIO()
    call_command("weights", "list", stdout=StringIO(), stderr=errors)

    assert not StoredWeights.objects.exists()
    lines = sorted(errors.getvalue().splitlines())
    assert lines == sorted(
        [
            "models--timm--convnext_atto.d2_in1k/model.safetensors is not a PyTorch state_dict file "
            "(torch.save or safetensors); not filed",
            "models--timm--convnext_atto.d2_in1k/model.safetensors: a link to a file outside the cache; not filed",
            f"{name}: a link to a file outside the cache; not filed",
        ]
    ), lines
    assert all("secret" not in line and str(tmp_path) not in line for line in lines)

    # Filed, then its link pointed elsewhere: no longer offered to anyone.
    good = hub_repository(store, "models--timm--convnext_atto.d2_in1k-copy")
    hub_snapshot(good, "3", convnext_blob(good))
    link = good / "snapshots" / "3" / "model.safetensors"
    row = StoredWeights.objects.create(network="timm/convnext_atto", source="timm", path=str(link))
    assert row.present and weights_for_networks() == [row]
    link.unlink()
    link.symlink_to(secret)
    assert not row.present and weights_for_networks() == []


def test_it_files_a_safetensors_import_under_a_safetensors_name_a_run_loads(store, tmp_path):
    from tests.support.weights_files import save_safetensors
    from trainer.networks import InputSpec, build_model, load_pretrained

    source = save_safetensors(torchvision.models.mobilenet_v3_small(weights=None).state_dict(), tmp_path / "lab")

    weights("import", str(source), "--network", "mobilenet_v3_small", "--tag", "lab")

    row = StoredWeights.objects.get()
    assert row.file_name.endswith(".safetensors") and row.tensor_count == 244
    loaded, _ = load_pretrained(build_model("mobilenet_v3_small", InputSpec(3, 32, 32, 5)), str(row.file))
    assert len(loaded) == 242  # all but the replaced head


def test_it_refuses_a_bomb_padded_with_a_stored_record_filing_nothing(store, mobilenet_file, tmp_path):
    from tests.support.weights_files import padded_bomb

    bomb = padded_bomb(torch.load(mobilenet_file, weights_only=True), tmp_path / "lab-bomb.pth")

    with pytest.raises(CommandError) as refused:
        weights("import", str(bomb), "--network", "mobilenet_v3_small")

    assert str(refused.value).startswith("lab-bomb.pth: record 'archive/data/bomb' inflates")
    assert not StoredWeights.objects.exists()
    assert not store.WEIGHTS_DIR.exists() or not any(store.WEIGHTS_DIR.iterdir())


# torch warns that it met pickle protocol 4 in the pickled-code file, before refusing it.
@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_it_refuses_what_is_not_the_networks_weights_in_one_line_filing_nothing(store, mobilenet_file, tmp_path):
    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(mobilenet_file.read_bytes()[:200_000])
    pickled = tmp_path / "evil.pth"
    pickled.write_bytes(pickle.dumps(os.system))  # code: weights_only never runs it
    cases = {
        (str(mobilenet_file), "mobilenet_v3_large"): "lab-mobilenet.pth is not mobilenet_v3_large's weights: "
        "features.2.block.0.0.weight is (72, 16, 1, 1) in the file, (64, 16, 1, 1) in mobilenet_v3_large",
        (str(mobilenet_file), "resnet18"): "lab-mobilenet.pth is not resnet18's weights: it lacks",
        (str(truncated), "mobilenet_v3_small"): "truncated.pth is not a complete PyTorch file (truncated or damaged)",
        (str(pickled), "mobilenet_v3_small"): "evil.pth holds pickled code, not only tensors; refused",
        (str(mobilenet_file), "nosuchnet"): "unknown network 'nosuchnet'; the store holds weights of: alexnet",
    }
    for (path, network), expected in cases.items():
        with pytest.raises(CommandError) as refused:
            weights("import", path, "--network", network)
        message = str(refused.value)
        assert message.startswith(expected) and "\n" not in message and str(tmp_path) not in message, message
    assert not StoredWeights.objects.exists()
    assert not store.WEIGHTS_DIR.exists() or not any(store.WEIGHTS_DIR.iterdir())


def test_it_says_fetch_has_no_network_access_here(store, monkeypatch):
    # A proxy nobody listens on: the download fails at once, as on a machine that is offline.
    monkeypatch.setenv("https_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")

    with pytest.raises(CommandError) as refused:
        weights("fetch", "mobilenet_v3_small")

    assert str(refused.value).startswith(
        "no network access: cannot download mobilenet_v3_small-047dcff4.pth from "
        "https://download.pytorch.org/models/mobilenet_v3_small-047dcff4.pth"
    )
    assert "manage.py weights import" in str(refused.value)
    assert not StoredWeights.objects.exists()


def test_it_files_a_segmentation_networks_weights_whatever_its_head(store, tmp_path):
    # COCO-with-VOC-labels weights have 21 classes: their head is replaced, the rest must match.
    torch.save(torchvision.models.segmentation.lraspp_mobilenet_v3_large(weights=None, num_classes=21,
               weights_backbone=None).state_dict(), tmp_path / "lraspp-lab.pth")  # fmt: skip

    line = weights("import", str(tmp_path / "lraspp-lab.pth"), "--network", "lraspp_mobilenet_v3_large")

    assert "local weights of lraspp_mobilenet_v3_large, unverified" in line
    with pytest.raises(CommandError, match="lraspp-lab.pth is not deeplabv3_mobilenet_v3_large's weights"):
        weights("import", str(tmp_path / "lraspp-lab.pth"), "--network", "deeplabv3_mobilenet_v3_large")


def test_it_files_a_zoo_networks_weights_under_one_plain_name_and_a_run_starts_from_them(store, owner_client, owner,
                                                                                        tmp_path):  # fmt: skip
    from timm import create_model

    from tests.support.factories import make_dataset_row
    from trainer.networks import InputSpec, build_model, load_pretrained
    from workbench.runs.attempts.config import run_config
    from workbench.runs.models import Run

    # The zoo names its networks timm/<architecture>: the "/" once made a folder and a traceback.
    source = tmp_path / "regnet-lab.pth"
    torch.save(create_model("regnetx_002", pretrained=False).state_dict(), source)

    line = weights("import", str(source), "--network", "timm/regnetx_002", "--tag", "lab")

    row = StoredWeights.objects.get()
    assert line.strip().startswith(f"filed as {row.reference}: local weights of timm/regnetx_002, unverified")
    assert row.file_name == f"timm-regnetx_002-lab-{row.sha256[:8]}.pth"
    assert [path.name for path in store.WEIGHTS_DIR.iterdir()] == [row.file_name]
    dataset = make_dataset_row(owner, status="building")  # a run that stays queued
    body = {"dataset": dataset.pk, "network": "timm/regnetx_002", "epochs": 1, "gpus": "cpu",
            "config": {"pretrained": row.reference}}  # fmt: skip
    response = owner_client.post("/api/runs/", body, content_type="application/json")
    assert response.status_code == 201, response.json()
    assert run_config(Run.objects.get(pk=response.json()["id"]))["pretrained"] == str(row.file)
    loaded, _ = load_pretrained(build_model("timm/regnetx_002", InputSpec(3, 32, 32, 5)), str(row.file))
    assert len(loaded) == row.tensor_count - 2  # all but the replaced head
