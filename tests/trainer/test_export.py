"""Exports and inference: bundle, TorchScript and ONNX agree with the trained PyTorch model, and
inference applies the training preprocessing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from PIL import Image

from trainer.checkpoint import CheckpointStore
from trainer.datum import DatumLMDB
from trainer.events import ListReporter
from trainer.export import export_run, judged
from trainer.inference import load_bundle, load_checkpoint_classifier
from trainer.preprocess import image_to_uint8, resize_image
from trainer.protocol import EXIT_DONE
from trainer.run import train
from trainer.tasks import detection_export

from .conftest import make_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, rgb16):
    run_dir = tmp_path_factory.mktemp("export") / "run"
    cfg = make_config(
        run_dir,
        rgb16,
        network="resnet18",
        epochs=2,
        batch_size=8,
        data={"crop_size": 12},
        solver={"optimizer": "adam", "base_lr": 0.003},
    )
    assert train(cfg, reporter=ListReporter()) == EXIT_DONE
    return run_dir


def _val_images(rgb16: Path) -> list[Image.Image]:
    db = DatumLMDB(rgb16 / "val_db")
    return [Image.fromarray(db[i][0].transpose(1, 2, 0)) for i in range(len(db))]


def test_it_exports_a_bundle_torchscript_and_onnx_that_agree(tmp_path, trained_run, rgb16):
    checkpoint = CheckpointStore(trained_run).best()
    result = export_run(checkpoint, tmp_path / "out")
    out = tmp_path / "out"
    assert {p.name for p in out.iterdir()} >= {
        "model.safetensors",
        "labels.txt",
        "preprocessing.json",
        "config.json",
        "README.txt",
        "mean.npy",
        "model.torchscript.pt",
        "model.onnx",
    }
    readme = (out / "README.txt").read_text()
    assert 'ort.InferenceSession("model.onnx")' in readme and "see trainer.preprocess.resize_image" not in readme
    # What it trained on by name, never where the server keeps it.
    config = json.loads((out / "config.json").read_text())
    assert config["run_dir"] == trained_run.name and "/" not in config["data"]["dataset"]
    pre = json.loads((out / "preprocessing.json").read_text())
    assert pre == {
        "width": 16,
        "height": 16,
        "channels": 3,
        "resize_mode": "squash",
        "crop": 12,
        "mean": "image",
        "scale": 1 / 255,
        "std": None,  # trained from scratch: no pretrained weights' std to divide by
        "input_shape": [3, 12, 12],
    }
    assert "load_bundle" in (out / "README.txt").read_text()
    assert result["onnx_check"]["same_top1"]
    # Each check says what it compared, and that it did (trainer.export.judged).
    for check in (result["onnx_check"], result["torchscript_check"]):
        assert check["checked"] is True and check["compared"] == check["images"] > 0

    reference = load_checkpoint_classifier(checkpoint)
    bundle = load_bundle(out)
    images = _val_images(rgb16)
    x = reference.preprocess(images)
    with torch.no_grad():
        want = reference.model(x)
    torch.testing.assert_close(bundle.model(x), want)
    torch.testing.assert_close(torch.jit.load(str(out / "model.torchscript.pt"))(x), want, rtol=1e-4, atol=1e-4)
    got = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"input": x.numpy()}
    )[0]
    assert (got.argmax(1) == want.argmax(1).numpy()).all()
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-3, atol=1e-4)

    top = bundle.classify(images[:2], top_k=2)
    assert len(top) == 2 and len(top[0]) == 2
    assert top[0][0][0] in {"class_0", "class_1", "class_2"} and top[0][0][1] >= top[0][1][1]


def test_it_classifies_with_the_accuracy_training_measured(trained_run, rgb16):
    classifier = load_checkpoint_classifier(CheckpointStore(trained_run).latest())
    db = DatumLMDB(rgb16 / "val_db")
    images = [Image.fromarray(db[i][0].transpose(1, 2, 0)) for i in range(len(db))]
    predicted = [top[0][0] for top in classifier.classify(images, top_k=1)]
    accuracy = np.mean([p == f"class_{db[i][1]}" for i, p in enumerate(predicted)])
    index = json.loads((trained_run / "checkpoints" / "index.json").read_text())
    last = index["snapshots"][CheckpointStore(trained_run).latest().name]
    assert accuracy == pytest.approx(last["top1"])


def test_it_exports_from_the_command_line(tmp_path, trained_run):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainer",
            "export",
            "--run-dir",
            str(trained_run),
            "--out",
            str(tmp_path / "b"),
            "--formats",
            "bundle",
        ],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["bundle"] == str(tmp_path / "b")


@pytest.mark.parametrize(
    ("mode", "expected_center"),
    [("squash", (255, 0, 0)), ("crop", (255, 0, 0)), ("fill", (255, 0, 0)), ("half_crop", (255, 0, 0))],
)
def test_it_resizes_like_digits(mode, expected_center):
    wide = Image.new("RGB", (40, 10), (255, 0, 0))
    out = resize_image(wide, 16, 16, mode)
    assert out.size == (16, 16)
    assert out.getpixel((8, 8)) == expected_center
    if mode == "fill":  # padded above and below with noise, not red
        assert out.getpixel((8, 0)) != (255, 0, 0)
    if mode == "crop":
        assert out.getpixel((8, 0)) == (255, 0, 0)


def test_it_center_crops_and_converts_modes_for_inference():
    pre = {"channels": 1, "width": 8, "height": 8, "resize_mode": "squash", "crop": 4}
    rgba = Image.new("RGBA", (8, 8), (10, 20, 30, 255))
    arr = image_to_uint8(rgba, pre)
    assert arr.shape == (1, 4, 4) and arr.dtype == np.uint8


def _run_readme_code(out: Path, image: Image.Image, tmp_path: Path) -> None:
    readme = (out / "README.txt").read_text()
    block = readme.split("With plain PyTorch")[1].split("\n\n")[1]
    code = "\n".join(line[4:] for line in block.splitlines())
    assert "import trainer" not in code and "from trainer" not in code
    image.save(tmp_path / "cat.png")
    result = subprocess.run(
        [sys.executable, "-c", code.replace("cat.jpg", str(tmp_path / "cat.png"))],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    printed = eval(result.stdout.strip())  # [(label, probability), ...]
    expected = load_bundle(out).classify([image], top_k=3)[0]
    assert [label for label, _ in printed] == [label for label, _ in expected]
    assert [p for _, p in printed] == pytest.approx([p for _, p in expected], abs=1e-5)


def test_it_writes_a_readme_whose_plain_pytorch_code_runs(tmp_path, trained_run, rgb16):
    export_run(CheckpointStore(trained_run).best(), tmp_path / "bundle", ("bundle",))
    _run_readme_code(tmp_path / "bundle", _val_images(rgb16)[0], tmp_path)


def test_it_writes_plain_pytorch_code_for_a_gray_torchvision_model(tmp_path, gray8):
    assert train(make_config(tmp_path / "run", gray8, network="resnet18", epochs=1), reporter=ListReporter()) == 0
    export_run(CheckpointStore(tmp_path / "run").latest(), tmp_path / "bundle", ("bundle",))
    assert "1-channel data" in (tmp_path / "bundle" / "README.txt").read_text()
    db = DatumLMDB(gray8 / "val_db")
    _run_readme_code(tmp_path / "bundle", Image.fromarray(db[0][0][0]), tmp_path)


def test_it_writes_a_readme_that_names_its_own_folder_not_a_temporary_one(tmp_path, trained_run):
    out = tmp_path / "work" / "run7-bundle"
    export_run(CheckpointStore(trained_run).best(), out, ("bundle",))
    readme = (out / "README.txt").read_text()
    assert 'load_bundle("run7-bundle")' in readme
    assert str(tmp_path) not in readme and "/tmp" not in readme


def _detections(boxes: list[list[float]], scores: list[float]) -> dict[str, np.ndarray]:
    return {
        "boxes": np.array(boxes, np.float32).reshape(-1, 4),
        "labels": np.ones(len(scores), np.int64),
        "scores": np.array(scores, np.float32),
    }


def test_it_says_a_detector_check_that_compared_no_box_could_not_check():
    # Issue 33: a detector that finds no box on any of the 8 images compared nothing, and that
    # was reported as checked ("0 boxes").
    nothing = [_detections([], []) for _ in range(8)]
    want = [{key: torch.from_numpy(value) for key, value in d.items()} for d in nothing]
    report = judged(detection_export._compare(nothing, want, "ONNX"))
    assert (report["checked"], report["compared"], report["images"]) == (False, 0, 8)
    assert report["not_checked"].startswith("PyTorch found no box scored 0.1 or more on the 8 images")
    # Boxes below the compared score do not count either; one above does.
    faint = [_detections([[1, 2, 5, 6]], [0.07])]
    assert (
        judged(detection_export._compare(faint, [{k: torch.from_numpy(v) for k, v in faint[0].items()}], "ONNX"))[
            "checked"
        ]
        is False
    )
    found = [_detections([[1, 2, 5, 6]], [0.9])]
    report = judged(detection_export._compare(found, [{k: torch.from_numpy(v) for k, v in found[0].items()}], "ONNX"))
    assert (report["checked"], report["compared"]) == (True, 1) and "not_checked" not in report


@pytest.mark.parametrize("network", ["fasterrcnn_mobilenet_v3_large_320_fpn", "retinanet_resnet50_fpn"])
def test_it_writes_a_detector_readme_that_rebuilds_the_trained_detectors_sizes(network):
    # The README rebuilt a 32 px detector with min_size=32, where the trainer builds it at its
    # floor of 128 px (detection.detector_side): the README's code found other boxes (issue 33).
    from trainer.networks import InputSpec
    from trainer.tasks.detection import Detector, build_detector

    pre = {"width": 48, "height": 32, "channels": 3, "resize_mode": "squash", "input_shape": [3, 32, 48]}
    detector = Detector(build_detector(network, InputSpec(3, 32, 48, 2)), ["a", "b"], pre)
    readme = detection_export.readme(detector, {"network": network}, ("bundle",), "run1")
    built = readme.split("import torch, torchvision\n")[1].split("    model.load_state_dict")[0]
    code = "import torchvision\n" + "\n".join(line[4:] for line in built.splitlines())
    scope: dict = {}
    exec(code, scope)  # the README's builder, as a user runs it
    rebuilt, trained = scope["model"].transform, detector.model.transform
    assert (rebuilt.min_size, rebuilt.max_size) == (trained.min_size, trained.max_size)


def test_it_compares_a_detectors_boxes_whatever_order_equal_scores_come_in():
    from trainer.tasks.detection_export import _compare

    boxes = np.array([[0.0, 0.0, 10.0, 10.0], [20.0, 20.0, 30.0, 30.0]], dtype=np.float32)
    want = [{"boxes": torch.tensor(boxes), "scores": torch.tensor([0.5, 0.5]), "labels": torch.tensor([1, 1])}]
    swapped = [{"boxes": boxes[::-1].copy(), "scores": np.array([0.5, 0.5], np.float32), "labels": np.array([1, 1])}]
    assert _compare(swapped, want, "ONNX")["max_box_diff"] == 0.0  # NMS may order ties either way
    moved = [{"boxes": boxes + np.float32(6.0), "scores": np.array([0.5, 0.5], np.float32), "labels": np.array([1, 1])}]
    with pytest.raises(RuntimeError, match="disagrees with PyTorch: boxes 6 px"):
        _compare(moved, want, "ONNX")
