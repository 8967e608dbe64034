"""Recipe input pipeline at 224: RandomResizedCrop + horizontal flip + TrivialAugment, images per
CPU-second, ours (trainer/augment.py: the loader only flips and stacks the uint8 images, the crop
and the policy run on the whole uint8 batch on the device, here the CPU) against torchvision's
reference ClassificationPresetTrain (references/classification/presets.py: the same transforms
per PIL image, then to float and normalised, in the loader) on the same decoded images.
Goal: ratio >= 5.

    .venv/bin/python bench/bench_recipes.py [--images 512] [--side 256] [--batch 64] [--threads 1] [--repeats 3]

Both start from decoded images in memory (decoding costs both the same). One thread each by
default, so CPU-seconds compare work, not parallelism. Both draw TrivialAugment's operation and
magnitude for every image. Each pipeline is timed --repeats times, the two taking turns, and the
least CPU time of each is kept: on a shared machine other processes only ever add to it.
A third row times the loader's share of ours alone (flips and the stack): on a GPU host that is
all its CPUs do, the crop and the policy running on the GPU, which is not timed here. A last
line times each stage of ours alone, in CPU milliseconds per image.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.augment import TrainAugment  # noqa: E402
from trainer.config import config_from_dict  # noqa: E402
from trainer.data import Normalize  # noqa: E402

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def make_images(count: int, side: int) -> list[np.ndarray]:
    """Photographs' stand-ins: smooth gradients with noise (TrivialAugment's operations cost the
    same on any content), H x W x 3 uint8."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, side, dtype=np.float32)
    images = []
    for _ in range(count):
        base = ramp[None, :, None] * rng.random(3) + ramp[:, None, None] * rng.random(3)
        noise = rng.normal(0, 20, (side, side, 3))
        images.append(np.clip(base / 2 + noise, 0, 255).astype(np.uint8))
    return images


def reference(images: list[np.ndarray], batch: int, out: int) -> tuple[float, int]:
    """ClassificationPresetTrain(crop_size=out, auto_augment_policy="ta_wide", random_erase_prob=0)."""
    preset = transforms.Compose(
        [
            transforms.RandomResizedCrop(out, interpolation=transforms.InterpolationMode.BILINEAR, antialias=True),
            transforms.RandomHorizontalFlip(0.5),
            transforms.TrivialAugmentWide(interpolation=transforms.InterpolationMode.BILINEAR),
            transforms.PILToTensor(),
            transforms.ConvertImageDtype(torch.float),
            transforms.Normalize(MEAN, STD),
        ]
    )
    pil = [Image.fromarray(image) for image in images]
    torch.manual_seed(0)
    started = time.process_time()
    for start in range(0, len(pil) - batch + 1, batch):
        torch.stack([preset(image) for image in pil[start : start + batch]])
    return time.process_time() - started, len(pil) // batch * batch


def our_pipeline(out: int) -> tuple[TrainAugment, Normalize]:
    """The trainer's batch augmentation with the recipe's crop and TrivialAugment, and its own
    normalisation of a batch, with ImageNet's mean and std as the reference's."""
    cfg = config_from_dict(
        {"run_dir": "bench", "data": {"random_resized_crop": True, "auto_augment": "trivialaugment"}},
        check_paths=False,
    )
    augment = TrainAugment(cfg, num_classes=10, out_size=(out, out))
    return augment, Normalize(torch.tensor(MEAN).view(3, 1, 1) * 255, std=torch.tensor(STD).view(3, 1, 1))


def ours(images: list[np.ndarray], batch: int, out: int) -> tuple[float, float, int]:
    """CPU-seconds of the whole pipeline with the CPU as the device, of the loader's share alone
    (what a GPU host's CPUs do: the rest runs on the GPU), and the images."""
    augment, normalize = our_pipeline(out)

    labels = torch.zeros(batch, dtype=torch.int64)
    chw = [image.transpose(2, 0, 1) for image in images]  # what the LMDB reader gives: C x H x W
    rng = np.random.default_rng(0)
    started, loader = time.process_time(), 0.0
    for step, start in enumerate(range(0, len(chw) - batch + 1, batch)):
        # The loader's share: flips (numpy views) and the stack into one uint8 batch.
        loading = time.process_time()
        flipped = [image[:, :, ::-1] if rng.random() < 0.5 else image for image in chw[start : start + batch]]
        uint8 = torch.from_numpy(np.ascontiguousarray(np.stack(flipped)))
        loader += time.process_time() - loading
        augment(uint8, labels, step=step, normalize=normalize)
    return time.process_time() - started, loader, len(chw) // batch * batch


def stages(images: list[np.ndarray], batch: int, out: int) -> dict[str, float]:
    """CPU milliseconds per image of each stage of ours with the CPU as the device: the crop
    (TrainAugment's resized crops), the policy (its per-image TrivialAugment) and the normalise,
    each timed alone over the same batches (where a 5x goal's budget would have to come from)."""
    augment, normalize = our_pipeline(out)
    spent = dict.fromkeys(("crop", "policy", "normalise"), 0.0)
    count = 0
    for start in range(0, len(images) - batch + 1, batch):
        uint8 = torch.from_numpy(np.stack([image.transpose(2, 0, 1) for image in images[start : start + batch]]))
        began = time.process_time()
        cropped = augment._resized_crops(uint8)
        spent["crop"] += time.process_time() - began
        began = time.process_time()
        for index in range(batch):
            augment.per_image(cropped[index])
        spent["policy"] += time.process_time() - began
        began = time.process_time()
        normalize(cropped)
        spent["normalise"] += time.process_time() - began
        count += batch
    return {name: 1000 * seconds / count for name, seconds in spent.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--side", type=int, default=256, help="the stored images' side (the crop is taken from it)")
    parser.add_argument("--out", type=int, default=224, help="the network's input side")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timings of each pipeline; the least is kept")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    images = make_images(args.images, args.side)
    ours(images[: args.batch], args.batch, args.out)  # warm-up: first calls compile nothing, but allocate
    reference(images[: args.batch], args.batch, args.out)
    ref_times, our_times, loader_times = [], [], []
    for _ in range(max(1, args.repeats)):
        ref_cpu, ref_count = reference(images, args.batch, args.out)
        our_cpu, loader_cpu, our_count = ours(images, args.batch, args.out)
        ref_times.append(ref_cpu)
        our_times.append(our_cpu)
        loader_times.append(loader_cpu)
    ref_cpu, our_cpu, loader_cpu = min(ref_times), min(our_times), min(loader_times)
    ref_rate, our_rate, loader_rate = ref_count / ref_cpu, our_count / our_cpu, our_count / loader_cpu
    print(
        f"{args.images} images {args.side}x{args.side} -> {args.out}x{args.out}, batch {args.batch}, "
        f"{args.threads} thread(s), least CPU time of {max(1, args.repeats)}: "
        "RandomResizedCrop + flip + TrivialAugment + normalise"
    )
    print("| pipeline | images | CPU-s | images per CPU-second |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| torchvision ClassificationPresetTrain (per PIL image) | {ref_count} | {ref_cpu:.2f} | {ref_rate:,.0f} |")
    print(f"| ours (uint8 batch, trainer/augment.py) | {our_count} | {our_cpu:.2f} | {our_rate:,.0f} |")
    loader_row = f"| ours, the loader's share alone (a GPU host's CPUs) | {our_count} | {loader_cpu:.2f} |"
    print(f"{loader_row} {loader_rate:,.0f} |")
    print(f"ratio (ours / reference): {our_rate / ref_rate:.2f}x with the CPU as the device (goal >= 5x);")
    print(f"the CPUs' work on a GPU host: {loader_rate / ref_rate:.1f}x (the device's share not timed: no GPU)")
    per_stage = stages(images, args.batch, args.out)
    shown = ", ".join(f"{name} {ms:.2f}" for name, ms in per_stage.items())
    print(f"ours per stage, CPU ms per image: {shown}; the reference {1000 * ref_cpu / ref_count:.2f} in all,")
    print(f"so 5x would leave {200 * ref_cpu / ref_count:.2f} ms per image for every stage together")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
