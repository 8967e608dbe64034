"""The new-run page: every field validated with a message, sweeps, clone, starting weights, and
the live endpoints (learning-rate preview, custom network shapes, network fit, placement)."""

from __future__ import annotations

import json
import time

import pytest
import torch
from django.urls import reverse

from datasets.models import Dataset
from tests.support.factories import make_dataset_row
from trainer.checkpoint import CheckpointStore
from trainer.config import SolverConfig
from trainer.networks import InputSpec, build_model
from trainer.solver import lr_curve
from workbench.runs.attempts.config import run_config
from workbench.runs.models import Run
from workbench.runs.services import run_create
from workbench.workers.models import Device
from workbench.workers.simulation import simulate_hosts

pytestmark = pytest.mark.django_db


def valid(ds, **changes) -> dict:
    data = {
        "name": "tiny", "dataset": ds.pk, "network": "lenet", "start_from": "scratch", "optimizer": "sgd",
        "base_lr": "0.05", "momentum": "0.9", "weight_decay": "0", "lr_policy": "step", "gamma": "0.1", "power": "1",
        "step_size": "33", "step_values": "50, 75", "min_lr": "0", "warmup_percent": "0", "onecycle_pct_start": "0.3",
        "onecycle_div_factor": "25", "onecycle_final_div_factor": "10000", "epochs": "2", "batch_size": "8",
        "grad_accum": "1", "val_interval": "1", "snapshot_interval": "1", "seed": "0", "mean_subtraction": "image",
        "precision": "fp32", "best_metric": "top1", "num_workers": "0", "device_mode": "cpu", "gpu_count": "1",
    }  # fmt: skip
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def errors_of(response) -> dict:
    form = response.context["form"]
    return {field: " ".join(messages) for field, messages in form.errors.items()}


def test_it_shows_the_form_with_the_datasets_and_networks(owner_client, dataset):
    response = owner_client.get(reverse("run-new"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="run-form"' in body and "vit_b_16" in body and "LeNet (Caffe/DIGITS)" in body
    assert response.context["datasets"][str(dataset.pk)] == {
        "id": dataset.pk, "name": "bars", "width": 8, "height": 8, "channels": 1, "classes": 3, "train": 24,
        "images": 36, "task": "classification", "recipe": True,
        "defaults": {"batch_size": "16", "best_metric": "top1"},  # 64 is more than its 24 training images
    }  # fmt: skip


def test_it_creates_a_run_with_every_setting(owner_client, dataset):
    response = owner_client.post(reverse("run-new"), valid(
        dataset, random_flip="on", crop_size="6", grad_clip_norm="5", lr_policy="multistep", step_values="40,80",
        warmup_percent="10"))  # fmt: skip
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == reverse("run-detail", args=[run.pk])
    assert run.name == "tiny" and run.network == "lenet" and run.device_request == {"kind": "cpu"}
    assert run.config["batch_size"] == 8 and run.config["epochs"] == 2
    sent = {"mean_subtraction": "image", "random_flip": True, "vertical_flip": False, "num_workers": 0, "crop_size": 6,
            "prefetch_factor": 4, "norm_mean": None, "norm_std": None}  # fmt: skip
    assert {name: run.config["data"].get(name) for name in sent} == sent  # the rest: the trainer's defaults
    assert run.config["solver"]["lr_policy"] == "multistep" and run.config["solver"]["step_values"] == [40.0, 80.0]
    assert run.config["solver"]["grad_clip_norm"] == 5 and run.config["solver"]["warmup_percent"] == 10
    assert run.sweep == ""


BAD_FIELDS = [
    ("dataset", "999", "Choose one of your ready datasets."),
    ("network", "resnet19", "Select a valid choice"),
    ("network", "alexnet", "alexnet needs images of at least"),
    ("optimizer", "sgdx", "Select a valid choice"),
    ("base_lr", "abc", "'abc' is not a positive number."),
    ("base_lr", "0", "must be above 0"),
    ("base_lr", "-1", "must be between 0 and 10"),
    ("base_lr", "", "This field is required."),
    ("momentum", "2", "less than or equal to 1"),
    ("weight_decay", "-0.1", "greater than or equal to 0"),
    ("lr_policy", "zigzag", "Select a valid choice"),
    ("gamma", "-1", "greater than or equal to 0"),
    ("power", "x", "Enter a number."),
    ("step_size", "101", "less than or equal to 100"),
    ("step_values", "50, 150", "150 must be between 0 and 100"),
    ("min_lr", "-1", "greater than or equal to 0"),
    ("warmup_percent", "120", "less than or equal to 100"),
    ("onecycle_pct_start", "1.5", "less than or equal to 1"),
    ("onecycle_div_factor", "0", "greater than or equal to 1"),
    ("onecycle_final_div_factor", "0.5", "greater than or equal to 1"),
    ("grad_clip_norm", "0", "greater than or equal to 1e-06"),
    ("epochs", "0", "greater than or equal to 0.01"),
    ("epochs", "nan", "Enter a number."),
    ("batch_size", "0", "0 must be between 1 and"),
    ("batch_size", "eight", "'eight' is not a whole number."),
    ("batch_size", "64", "64 is larger than the 24 training images"),
    ("grad_accum", "0", "greater than or equal to 1"),
    ("grad_accum", "3", "per-process batch 8 is not divisible by grad_accum 3"),
    ("val_interval", "-1", "greater than or equal to 0"),
    ("snapshot_interval", "-2", "greater than or equal to 0"),
    ("seed", "-1", "greater than or equal to 0"),
    ("crop_size", "0", "greater than or equal to 1"),
    ("crop_size", "9", "9 is larger than the dataset images (8x8)"),
    ("mean_subtraction", "median", "Select a valid choice"),
    ("precision", "fp8", "Select a valid choice"),
    ("precision", "fp16", "'fp16' needs CUDA devices; on the CPU use 'bf16' or 'fp32'"),
    ("best_metric", "top3", "Select a valid choice"),
    ("num_workers", "-1", "greater than or equal to 0"),
    ("device_mode", "tpu", "Select a valid choice"),
    ("gpu_count", "0", "greater than or equal to 1"),
    ("start_from", "elsewhere", "Select a valid choice"),
    ("start_from", "run", "Choose the run whose weights to start from."),
    ("start_from", "upload", "Choose a .pt file holding a state_dict."),
    ("start_from", "path", "did not start from saved weights"),
    ("previous_run", "424242", "Select a valid choice"),
    ("name", "x" * 151, "at most 150 characters"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_FIELDS, ids=[f"{f}={v[:12]}" for f, v, _ in BAD_FIELDS])
def test_it_names_the_problem_of_every_field(owner_client, dataset, field, value, message):
    response = owner_client.post(reverse("run-new"), valid(dataset, **{field: value}))
    assert response.status_code == 200
    errors = errors_of(response)
    shown = errors.get(field) or errors.get("previous_run") or errors.get("pretrained_file") or ""
    assert message in shown, errors
    assert not Run.objects.exists()
    assert 'id="form-errors"' in response.content.decode()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"device_mode": "count", "gpu_count": "3", "batch_size": "8"}, "batch_size",
         "8 is not divisible by the 3 processes"),
        ({"device_mode": "specific"}, "gpus", "Tick at least one GPU"),
        ({"device_mode": "count", "gpu_count": "3", "model_parallel": "2"}, "model_parallel",
         "3 GPU(s) cannot form groups of 2; ask for a multiple of 2 GPUs"),
        ({"device_mode": "cpu", "model_parallel": "2"}, "model_parallel", "splitting the network needs several GPUs"),
        ({"device_mode": "count", "gpu_count": "2", "model_parallel": "2", "compile": "on"}, "compile",
         "not available with model_parallel > 1"),
        ({"device_mode": "specific", "gpus": ["a0@simulated:0", "a1@simulated:1"]}, "gpus",
         "Choose GPUs of one host"),
        ({"network": "custom", "custom_layers": "[{"}, "custom_layers", "Not valid JSON"),
        ({"network": "custom", "custom_layers": ""}, "custom_layers", "Add at least one layer"),
        ({"network": "custom", "custom_layers": '[{"type": "conv3d"}]'}, "custom_layers",
         "layer 0: type 'conv3d' is not one of"),
        ({"network": "custom", "custom_layers": '[{"type": "flatten"}, {"type": "linear", "out_features": 4}]'},
         "custom_layers", "the network outputs [4], expected [3] classes"),
        ({"network": "custom", "custom_layers": '[{"type": "conv2d", "out_channels": 4, "kernel_size": 9}, '
                                                '{"type": "flatten"}, {"type": "linear"}]'},
         "custom_layers", "layer 0 (conv2d)"),
    ],
)  # fmt: skip
def test_it_checks_the_whole_request_with_the_trainers_rules(owner_client, dataset, changes, field, message):
    simulate_hosts(hosts=2, gpus_per_host=2, prefix="a")
    response = owner_client.post(reverse("run-new"), valid(dataset, **changes))
    assert response.status_code == 200
    assert message in errors_of(response).get(field, ""), errors_of(response)
    assert not Run.objects.exists()


def test_it_creates_a_sweep_of_every_combination(owner_client, dataset):
    response = owner_client.post(reverse("run-new"), valid(dataset, base_lr="0.1, 0.01", batch_size="4,8"))
    runs = list(Run.objects.order_by("pk"))
    assert len(runs) == 4 and len({run.sweep for run in runs}) == 1 and runs[0].sweep.startswith("tiny · ")
    assert [(r.config["solver"]["base_lr"], r.config["batch_size"]) for r in runs] == [
        (0.1, 4), (0.1, 8), (0.01, 4), (0.01, 8)]  # fmt: skip
    assert [r.name for r in runs] == ["tiny lr=0.1 bs=4", "tiny lr=0.1 bs=8", "tiny lr=0.01 bs=4", "tiny lr=0.01 bs=8"]
    assert response.status_code == 302 and "sweep=" in response.url
    page = owner_client.get(response.url + "&group=sweep").content.decode()
    assert page.count('class="group-row"') == 1 and "overlay their curves" in page
    assert f"runs={','.join(str(r.pk) for r in reversed(runs))}" in page  # newest first


def test_it_refuses_a_sweep_that_is_too_big(owner_client, dataset):
    lrs = ", ".join(f"0.0{i}" for i in range(1, 10))
    response = owner_client.post(reverse("run-new"), valid(dataset, base_lr=lrs, batch_size="1,2,4,8"))
    assert "The sweep makes 36 runs; at most 32 at once." in errors_of(response)["base_lr"]


def test_it_prefills_the_form_from_a_run_to_clone(owner_client, owner, dataset):
    config = {"epochs": 3.0, "batch_size": 4, "data": {"num_workers": 0, "crop_size": 6, "random_flip": True},
              "solver": {"optimizer": "adam", "base_lr": 0.003, "lr_policy": "cosine", "min_lr": 0.0001}}  # fmt: skip
    run = run_create(owner=owner, dataset=dataset, name="orig", network="lenet", config=config,
                     device_request={"kind": "count", "count": 2})  # fmt: skip
    response = owner_client.get(reverse("run-new"), {"clone": run.pk})
    form = response.context["form"]
    assert form["name"].value() == "orig (clone)" and form["optimizer"].value() == "adam"
    assert form["base_lr"].value() == "0.003" and form["lr_policy"].value() == "cosine"
    assert form["crop_size"].value() == 6 and form["random_flip"].value() is True and form["epochs"].value() == 3.0
    assert form["device_mode"].value() == "count" and form["gpu_count"].value() == 2
    assert "cloned from run #" in response.content.decode()


def test_it_does_not_clone_another_users_run(client, other_user, owner, dataset):
    run = run_create(owner=owner, dataset=dataset, name="orig", network="lenet", config={}, device_request={})
    client.force_login(other_user)
    assert client.get(reverse("run-new"), {"clone": run.pk}).status_code == 404


def fake_checkpoint(run: Run) -> torch.nn.Module:
    model = build_model("lenet", InputSpec(1, 8, 8, 3))
    CheckpointStore(run.run_dir).save({"model": model.state_dict(), "config": {}}, step=6, is_best=True)
    return model


def test_it_starts_from_a_previous_runs_weights(owner_client, owner, dataset):
    previous = run_create(owner=owner, dataset=dataset, name="prev", network="lenet", config={}, device_request={})
    model = fake_checkpoint(previous)
    owner_client.post(reverse("run-new"), valid(dataset, start_from="run", previous_run=str(previous.pk)))
    run = Run.objects.exclude(pk=previous.pk).get()
    assert run.config["pretrained"] == f"run:{previous.pk}:last"  # a run still going: its latest snapshot
    state = torch.load(run_config(run)["pretrained"], weights_only=True)  # copied at launch
    assert torch.equal(state["features.0.weight"], model.state_dict()["features.0.weight"])
    response = owner_client.post(reverse("run-new"), valid(dataset, start_from="run", previous_run=str(previous.pk),
                                                           network="resnet18"))  # fmt: skip
    assert "trained a lenet; choose network lenet" in errors_of(response)["previous_run"]


def test_it_clones_the_weights_a_run_started_from_by_reference(owner_client, owner, dataset):
    previous = run_create(owner=owner, dataset=dataset, name="prev", network="lenet", config={}, device_request={})
    fake_checkpoint(previous)
    # Finished: its best checkpoint is what the form takes (a run still going gives its latest snapshot).
    Run.objects.filter(pk=previous.pk).update(state=Run.State.DONE)
    owner_client.post(reverse("run-new"), valid(dataset, start_from="run", previous_run=str(previous.pk)))
    tuned = Run.objects.exclude(pk=previous.pk).get()
    form = owner_client.get(reverse("run-new"), {"clone": tuned.pk}).context["form"]
    assert (form["start_from"].value(), form["pretrained_path"].value()) == ("path", f"run:{previous.pk}")
    response = owner_client.post(
        reverse("run-new"), valid(dataset, start_from="path", pretrained_path=f"run:{previous.pk}")
    )
    assert response.status_code == 302
    assert Run.objects.order_by("-pk").first().config["pretrained"] == tuned.config["pretrained"]


def test_it_starts_from_an_uploaded_state_dict_and_refuses_other_files(owner_client, dataset, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    path = tmp_path / "weights.pt"
    torch.save(build_model("lenet", InputSpec(1, 8, 8, 3)).state_dict(), path)
    upload = SimpleUploadedFile("weights.pt", path.read_bytes())
    owner_client.post(reverse("run-new"), valid(dataset, start_from="upload", pretrained_file=upload))
    run = Run.objects.get()
    assert run.config["pretrained"].startswith("upload:")
    assert "features.0.weight" in torch.load(run_config(run)["pretrained"], weights_only=True)
    junk = SimpleUploadedFile("junk.pt", b"not a pickle")
    response = owner_client.post(reverse("run-new"), valid(dataset, start_from="upload", pretrained_file=junk))
    assert "junk.pt is not a PyTorch state_dict file" in errors_of(response)["pretrained_file"]
    assert Run.objects.count() == 1


# ----------------------------------------------------------------------------- live endpoints


def test_it_previews_exactly_the_training_learning_rate_curve(owner_client, dataset):
    data = valid(dataset, lr_policy="step", step_size="25", gamma="0.5", epochs="10", batch_size="8, 4",
                 warmup_percent="10")  # fmt: skip
    body = owner_client.post(reverse("run-new-lr-preview"), data).json()
    first, second = body["traces"]
    assert (first["total_steps"], first["steps_per_epoch"], second["total_steps"]) == (30, 3, 60)
    solver = SolverConfig(base_lr=0.05, lr_policy="step", step_size=25, gamma=0.5, warmup_percent=10)
    assert list(zip(first["steps"], first["lr"], strict=True)) == lr_curve(solver, 30, 200)
    assert first["epochs"][-1] == round(29 / 3, 4)


def test_it_names_the_field_the_preview_cannot_use(owner_client, dataset):
    response = owner_client.post(reverse("run-new-lr-preview"), valid(dataset, gamma="-1", batch_size="100"))
    assert response.status_code == 400
    assert response.json()["errors"]["gamma"] == "Ensure this value is greater than or equal to 0."
    response = owner_client.post(reverse("run-new-lr-preview"), valid(dataset, batch_size="100"))
    assert response.json()["errors"] == {"batch_size": "100 is larger than the 24 training images"}


def test_it_shows_the_output_shape_after_each_custom_layer(owner_client, dataset):
    layers = [{"type": "conv2d", "out_channels": 4, "kernel_size": 3, "padding": 1}, {"type": "relu"},
              {"type": "max_pool", "kernel_size": 2}, {"type": "flatten"}, {"type": "linear"}]  # fmt: skip
    url = reverse("run-new-layer-shapes")
    body = owner_client.post(url, {"dataset": dataset.pk, "layers": layers}, content_type="application/json").json()
    assert [s["shape"] for s in body["shapes"]] == [[1, 8, 8], [4, 8, 8], [4, 8, 8], [4, 4, 4], [64], [3]]
    assert body["params"] == 4 * 9 + 4 + 64 * 3 + 3
    layers[2]["kernel_size"] = 16
    response = owner_client.post(url, {"dataset": dataset.pk, "layers": layers}, content_type="application/json")
    assert response.status_code == 400 and response.json()["index"] == 2
    assert response.json()["error"].startswith("layer 2 (max_pool)")
    response = owner_client.post(url, {"dataset": 999, "layers": layers}, content_type="application/json")
    assert response.json() == {"error": "dataset: choose one of your ready datasets"}


def test_it_caps_the_layer_shape_preview_and_answers_400_to_any_body(owner_client, dataset):
    url = reverse("run-new-layer-shapes")
    many = [{"type": "relu"}] * 200_000 + [{"type": "flatten"}, {"type": "linear"}]  # 134 s of CPU before
    started = time.monotonic()
    response = owner_client.post(url, {"dataset": dataset.pk, "layers": many}, content_type="application/json")
    assert time.monotonic() - started < 5
    assert response.status_code == 400 and response.json()["error"] == "custom_layers: 200002 layers; at most 256"
    huge = [{"type": "flatten"}, {"type": "linear", "out_features": 100_000_000}, {"type": "linear"}]
    response = owner_client.post(url, {"dataset": dataset.pk, "layers": huge}, content_type="application/json")
    assert response.status_code == 400 and "6,500,000,000 parameters" in response.json()["error"]
    for body in ([1, 2], {"dataset": "9" * 400, "layers": huge}, {"dataset": True}):
        response = owner_client.post(url, body, content_type="application/json")
        assert response.json() == {"error": "dataset: choose one of your ready datasets"}
    layers = [{"type": "flatten"}, {"type": "linear"}]
    crops = owner_client.post(
        url, {"dataset": dataset.pk, "layers": layers, "crop_size": 10**400}, content_type="application/json"
    )
    assert crops.json()["shapes"][0]["shape"] == [1, 8, 8]  # no crop a run could take: the images' size
    assert owner_client.get(reverse("run-new-networks"), {"dataset": "9" * 400}).status_code == 400
    assert owner_client.get(reverse("run-new"), {"clone": "9" * 400}).status_code == 200


def test_it_tells_which_networks_fit_the_dataset(owner_client, dataset):
    body = owner_client.get(reverse("run-new-networks"), {"dataset": dataset.pk}).json()
    assert body["networks"]["lenet"]["problem"] == "" and body["networks"]["lenet"]["params"] > 100_000
    assert "alexnet needs images of at least" in body["networks"]["alexnet"]["problem"]
    assert "vit_b_16 needs square images whose side is a multiple of 16" in body["networks"]["vit_b_16"]["problem"]
    # The sizes note is the dataset's: resnet18 takes 8x8 images (no "fine from 32×32" here).
    assert body["networks"]["resnet18"]["note"] == "takes these 8×8 images; designed for 224×224"
    assert body["networks"]["alexnet"]["note"] == body["networks"]["alexnet"]["problem"]


def test_it_says_whether_the_run_starts_now_or_waits_and_where(owner_client, owner, other_user, dataset):
    url = reverse("run-new-placement")
    assert "no worker online" in owner_client.get(url, {"device_mode": "auto"}).json()["message"]
    simulate_hosts(hosts=1, gpus_per_host=2)
    body = owner_client.get(url, {"device_mode": "count", "gpu_count": "2"}).json()
    assert body == {"start_now": True, "position": None, "queue_length": 0,
                    "message": "Starts now on sim0@simulated: GPU 0, GPU 1."}  # fmt: skip
    holder = run_create(owner=other_user, dataset=dataset, name="big", network="lenet", config={},
                        device_request={"kind": "count", "count": 2})  # fmt: skip
    Device.objects.filter(kind="gpu").update(run=holder)
    Run.objects.filter(pk=holder.pk).update(state=Run.State.RUNNING)
    run_create(owner=other_user, dataset=dataset, name="next", network="lenet", config={},
               device_request={"kind": "count", "count": 1})  # fmt: skip
    body = owner_client.get(url, {"device_mode": "count", "gpu_count": "1"}).json()
    assert body["start_now"] is False and body["position"] == 2
    assert body["message"] == "Waits in the queue at position 2 of 2: needs 1 GPU on one host, 0 free."
    body = owner_client.get(url, {"device_mode": "cpu"}).json()
    assert body["start_now"] is True and body["message"] == "Starts now on sim0@simulated: CPU."
    body = owner_client.get(url, {"device_mode": "specific", "gpus": ["sim0@simulated:1"]}).json()
    # The holder is another user's: its name stays theirs.
    assert "GPU 1 on sim0@simulated is in use by another user's run." in body["message"]
    assert owner_client.get(url, {"device_mode": "specific"}).json()["errors"] == {"gpus": "Tick at least one GPU."}


def test_it_splits_the_network_over_groups_of_gpus(owner_client, dataset):
    simulate_hosts(hosts=1, gpus_per_host=4)
    url = reverse("run-new-placement")
    body = owner_client.get(url, {"device_mode": "count", "gpu_count": "4", "model_parallel": "2"}).json()
    assert body["start_now"] is True
    assert body["message"].endswith("The network is split over 2 GPUs per copy; 2 copies train in data parallel.")
    body = owner_client.get(url, {"device_mode": "count", "gpu_count": "3", "model_parallel": "2"}).json()
    assert body == {"errors": {"model_parallel": "3 GPU(s) cannot form groups of 2; ask for a multiple of 2 GPUs"}}
    response = owner_client.post(
        reverse("run-new"), valid(dataset, device_mode="count", gpu_count="4", model_parallel="2")
    )
    run = Run.objects.get()
    assert response.status_code == 302 and run.config["model_parallel"] == 2
    assert run.device_request == {"kind": "count", "count": 4}
    page = owner_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "network split over 2 devices per copy" in page
    clone = owner_client.get(reverse("run-new"), {"clone": run.pk})
    assert clone.context["form"].initial["model_parallel"] == 2
    # Without a split, the stored config has the trainer's default.
    owner_client.post(reverse("run-new"), valid(dataset, name="whole"))
    assert Run.objects.get(name="whole").config["model_parallel"] == 1


def test_it_offers_only_ready_datasets_of_the_user(owner_client, owner, other_user):
    make_dataset_row(owner, name="building", status=Dataset.Status.BUILDING)
    make_dataset_row(other_user, name="bobs")
    response = owner_client.get(reverse("run-new"))
    assert "There is no ready dataset yet" in response.content.decode()
    assert json.loads(json.dumps(response.context["datasets"])) == {}
