"""The progress bar of one training epoch, on the main process: the running mean losses, the batch's instances
and image size, and the GPU memory reserved."""

from __future__ import annotations

from typing import Any

import torch
from tqdm import tqdm


class EpochBar:
    """A bar of `total` batches for epoch `epoch` of `epochs`; called after each batch with its index, the mean
    loss items (box, obj, cls) so far and the batch; hidden unless `visible`."""

    def __init__(self, total: int, *, epoch: int, epochs: int, device: torch.device, visible: bool) -> None:
        self.device = device
        self.bar = tqdm(total=total, desc=f"epoch {epoch + 1}/{epochs}", leave=False, disable=not visible)

    def __call__(self, i: int, mean_items: torch.Tensor, batch: Any) -> None:
        memory = torch.cuda.memory_reserved(self.device) / 2**30 if self.device.type == "cuda" else 0.0
        box, obj, cls = mean_items.tolist()
        self.bar.set_postfix_str(f"box {box:.4f} obj {obj:.4f} cls {cls:.4f} inst {batch.targets.shape[0]} "
                                 f"img {batch.images.shape[-1]} mem {memory:.2f}G")  # fmt: skip
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
