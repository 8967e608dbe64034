"""The task layer (trainer/tasks/): a detector and a segmentation network train through the same
engine as a classifier (DDP with gloo included), report their losses and metrics, keep the best
checkpoint by their own metric, and a network of another task is refused before anything starts."""

from __future__ import annotations

import json

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from PIL import Image

from tests.support.task_data import make_task_folder
from trainer.checkpoint import CheckpointStore
from trainer.config import ConfigError, config_from_dict
from trainer.data import ShardedSampler
from trainer.distributed import free_port
from trainer.engine import prepare
from trainer.events import ListReporter
from trainer.inference import load_checkpoint_predictor
from trainer.networks import InputSpec
from trainer.protocol import EXIT_DONE, TASK_METRICS
from trainer.run import train
from trainer.targets import decode_boxes, decode_mask, encode_boxes, encode_mask
from trainer.tasks.detection import FINEST_STRIDE, MIN_CELLS, MeanAP, build_detector

pytestmark = pytest.mark.slow


def config(tmp_path, folder, network: str, **fields):
    return config_from_dict(
        {
            "run_dir": str(tmp_path / "run"),
            "network": network,
            "epochs": 1,
            "batch_size": 4,
            "devices": ["cpu"],
            "metrics_interval": 1,
            "data": {"dataset": str(folder), "num_workers": 0, "mean_subtraction": "none"},
            "solver": {"optimizer": "sgd", "base_lr": 0.01},
            **fields,
        }
    )


def test_it_gives_every_detector_at_least_min_cells_across_its_finest_feature_map():
    for name, stride in FINEST_STRIDE.items():
        model = build_detector(name, InputSpec(3, 48, 64, 2)).eval()
        short = model.transform.min_size[0]
        assert short == max(48, MIN_CELLS * stride), name
        assert model.transform.max_size == -(-64 * short // 48), name  # the long side scaled alike
        with torch.no_grad():  # the table's stride is the backbone's
            features = model.backbone(torch.zeros(1, 3, 128, 128))
        assert 128 // max(f.shape[-1] for f in features.values()) == stride, name
    # Large enough images keep their own size (torchvision's 800 px default is not applied).
    large = build_detector("fasterrcnn_mobilenet_v3_large_320_fpn", InputSpec(3, 200, 300, 2))
    assert large.transform.min_size == (200,) and large.transform.max_size == 300


def test_it_round_trips_box_and_mask_records():
    boxes = torch.tensor([[1, 2.5, 3, 40, 50, 0], [0, 0, 0, 8, 8, 1]]).numpy()
    assert (decode_boxes(encode_boxes(boxes)) == boxes).all()
    assert decode_boxes(encode_boxes(boxes[:0])).shape == (0, 6)  # an image without objects
    mask = (torch.arange(12).reshape(3, 4) % 3).to(torch.uint8).numpy()
    mask[0, 0] = 255
    assert (decode_mask(encode_mask(mask)) == mask).all()


def test_it_trains_a_detector_on_two_ranks_and_keeps_the_best_by_map(tmp_path):
    # An odd validation split: the ranks' shards differ by one image (it crashed gloo, issue 22).
    folder = make_task_folder(tmp_path / "ds", task="detection", train=8, val=3)
    reporter = ListReporter()
    cfg = config(tmp_path, folder, "fasterrcnn_mobilenet_v3_large_320_fpn", devices=["cpu", "cpu"])
    assert train(cfg, reporter=reporter) == EXIT_DONE, reporter.events[-1]
    (metrics, *_) = reporter.of_type("metrics")
    assert {"loss_classifier", "loss_box_reg", "loss_objectness", "loss_rpn_box_reg"} <= set(metrics)
    (validation,) = reporter.of_type("validation")
    assert set(TASK_METRICS["detection"]) <= set(validation) and 0 <= validation["map"] <= 1
    best = CheckpointStore.load(CheckpointStore(tmp_path / "run").best())
    assert best["task"] == "detection" and best["best"] == validation["map"]
    assert reporter.events[-1]["message"].startswith("finished 2 steps (1.00 epochs), val map ")
    # Its boxes come back in each image's own pixels, whatever its size.
    detector = load_checkpoint_predictor(CheckpointStore(tmp_path / "run").best())
    (found,) = detector.detect([Image.new("RGB", (128, 96))], min_score=0.0)
    assert all(0 <= b["box"][0] <= b["box"][2] <= 128 and 0 <= b["box"][1] <= b["box"][3] <= 96 for b in found)
    assert {b["label"] for b in found} <= {"square", "disc"}


def _found(images: list[torch.Tensor]) -> list[dict[str, torch.Tensor]]:
    """A stand-in detector: it finds image 1's square exactly and nothing in images 0 and 2."""
    box = torch.tensor([[8.0, 8.0, 24.0, 24.0]])
    return [
        {"boxes": box, "scores": torch.tensor([0.9]), "labels": torch.tensor([1])}
        if int(image[0, 0, 0]) == 1
        else {"boxes": torch.zeros(0, 4), "scores": torch.zeros(0), "labels": torch.zeros(0, dtype=torch.long)}
        for image in images
    ]


def _score_split(rank: int, world: int, port: int, out: str) -> None:
    """One rank's validation of a 3-image split, each image with one square (class 0)."""
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    evaluator = MeanAP(torch.device("cpu"))
    for index, _ in ShardedSampler(3, rank=rank, world=world, shuffle=False):
        image = torch.full((1, 3, 32, 32), float(index))
        evaluator.update(_found, image, [{"boxes": torch.tensor([[8.0, 8.0, 24.0, 24.0]]),
                                          "labels": torch.tensor([0]), "ignore": torch.tensor([False])}])  # fmt: skip
    result = evaluator.compute(world=world)
    with open(f"{out}/{world}-{rank}.json", "w") as file:
        json.dump(result, file)
    if world > 1:
        dist.destroy_process_group()


def test_it_counts_every_validation_image_once_when_the_ranks_shards_differ(tmp_path):
    # 3 images on 2 ranks: rank 0 holds images 0 and 2, rank 1 image 1, the only one found.
    mp.spawn(_score_split, args=(2, free_port(), str(tmp_path)), nprocs=2)
    _score_split(0, 1, 0, str(tmp_path))
    one, *ranks = (json.loads((tmp_path / name).read_text()) for name in ("1-0.json", "2-0.json", "2-1.json"))
    assert ranks == [one, one]  # every rank reports what one process measures
    assert one["mar_100"] == pytest.approx(1 / 3)  # 1 of 3 squares: none missed or counted twice


def test_it_trains_a_segmentation_network_and_reports_miou(tmp_path):
    folder = make_task_folder(tmp_path / "ds", task="segmentation", train=8, val=4)
    reporter = ListReporter()
    assert train(config(tmp_path, folder, "lraspp_mobilenet_v3_large"), reporter=reporter) == EXIT_DONE
    (validation,) = reporter.of_type("validation")
    assert set(TASK_METRICS["segmentation"]) <= set(validation)
    assert 0 <= validation["miou"] <= 1 and 0 <= validation["pixel_accuracy"] <= 1
    assert CheckpointStore.load(CheckpointStore(tmp_path / "run").best())["best"] == validation["miou"]
    segmenter = load_checkpoint_predictor(CheckpointStore(tmp_path / "run").best())
    (mask,) = segmenter.segment([Image.new("RGB", (100, 70), (230, 60, 40))])
    assert mask.shape == (70, 100) and set(mask.ravel().tolist()) <= {0, 1, 2}


def test_it_refuses_a_network_or_metric_of_another_task_before_anything_starts(tmp_path):
    detection = make_task_folder(tmp_path / "det", task="detection", train=4, val=0)
    with pytest.raises(ConfigError) as error:
        prepare(config(tmp_path, detection, "resnet18"))
    assert error.value.field == "network" and "not a detection network" in error.value.message
    segmentation = make_task_folder(tmp_path / "seg", task="segmentation", train=4, val=0)
    with pytest.raises(ConfigError) as error:
        prepare(config(tmp_path, segmentation, "lraspp_mobilenet_v3_large", best_metric="map"))
    assert error.value.field == "best_metric" and "not a metric of segmentation" in error.value.message
    with pytest.raises(ConfigError) as error:
        prepare(config(tmp_path, detection, "fasterrcnn_mobilenet_v3_large_fpn", model_parallel=2,
                       devices=["cpu", "cpu"]))  # fmt: skip
    assert error.value.field == "model_parallel"


@pytest.mark.parametrize(
    ("task_name", "network"),
    [("segmentation", "lraspp_mobilenet_v3_large"), ("detection", "fasterrcnn_mobilenet_v3_large_320_fpn")],
)
def test_it_augments_a_sample_by_its_seed_alone_leaving_torchs_rng_as_it_was(tmp_path, task_name, network):
    from trainer.dataset_folder import load_dataset_folder
    from trainer.tasks import task_for

    folder = make_task_folder(tmp_path / "data", task=task_name, size=64, train=4, val=2)
    cfg = config_from_dict(
        {"run_dir": "unused", "network": network, "data": {"dataset": str(folder)}}, check_paths=False
    )
    dataset = task_for(task_name).dataset(load_dataset_folder(folder), "train", cfg=cfg, train=True)

    def flat(sample) -> torch.Tensor:
        image, target = sample
        parts = [image.flatten().float()]
        parts += [target["boxes"].flatten()] if isinstance(target, dict) else [target.flatten().float()]
        return torch.cat(parts)

    torch.manual_seed(1)
    first = flat(dataset[(0, 7)])
    state = torch.get_rng_state()
    torch.rand(5)  # another draw between: the sample's augmentation must not depend on it
    assert torch.equal(flat(dataset[(0, 7)]), first)  # the seed alone decides it (resume sees the same)
    torch.set_rng_state(state)
    dataset[(0, 8)]
    assert torch.equal(torch.get_rng_state(), state)  # the caller's stream is left as it was
    assert any(not torch.equal(flat(dataset[(0, seed)]), first) for seed in range(20, 30))  # seeds differ
