"""The loop's meter: loss (and its named parts), throughput and data-wait over the current
metrics interval."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist


class Meter:
    """Loss, throughput and data-wait over the current metrics interval. The loss is summed on
    the device and read once per interval, so the loop never forces a sync per step."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.loss_sum: torch.Tensor | float = 0.0
        self.parts: dict[str, torch.Tensor | float] = {}
        self.loss_count = 0
        self.images = 0
        self.data_wait = 0.0
        self.start = time.perf_counter()

    def update(
        self, loss: torch.Tensor, images: int, wait: float, parts: dict[str, torch.Tensor] | None = None
    ) -> None:
        self.loss_sum = self.loss_sum + loss.detach().float()
        for name, value in (parts or {}).items():
            self.parts[name] = self.parts.get(name, 0.0) + value.detach().float()
        self.loss_count += 1
        self.images += images
        self.data_wait += wait

    def average_over_ranks(self) -> None:
        # Every rank reaches the same metrics step, so this collective lines up (the parts too:
        # every rank's task names the same ones).
        names = sorted(self.parts)
        total = torch.stack(
            [
                torch.as_tensor(v, dtype=torch.float32).reshape(())
                for v in [self.loss_sum, *(self.parts[n] for n in names)]
            ]
        )
        if not total.is_cuda and dist.get_backend() == "nccl":
            total = total.cuda()
        dist.all_reduce(total)
        total = total / dist.get_world_size()
        self.loss_sum = total[0]
        self.parts = {name: total[i + 1] for i, name in enumerate(names)}

    def part_losses(self) -> dict[str, float]:
        """The loss's named parts (a detector's classifier, box, objectness, RPN), averaged."""
        count = max(1, self.loss_count)
        return {f"loss_{name}": float(value) / count for name, value in self.parts.items()}

    def loss(self) -> float:
        total = self.loss_sum.item() if isinstance(self.loss_sum, torch.Tensor) else self.loss_sum
        return total / max(1, self.loss_count)

    def state(self) -> dict[str, float]:
        return {"loss_sum": float(self.loss()) * self.loss_count, "loss_count": self.loss_count}
