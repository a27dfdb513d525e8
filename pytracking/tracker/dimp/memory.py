"""The classifier's sample memory: a fixed number of (feature map, target box, weight) slots on the device.

The first ``num_init`` slots hold the initial (augmented) samples and are never replaced. A new sample
gets weight ``lr`` after the others are scaled by ``1 - lr``; it goes into the next free slot, or, once the
memory is full, replaces the non-initial sample with the smallest weight. After every update the initial
samples are given at least ``init_min_weight`` of the total weight (their share is scaled up, the rest down).
The slot is chosen on the device (``argmin``): no host synchronisation; only the count of filled slots is a
host integer. With ``sync_free=True`` even that goes: :meth:`SampleMemory.add` takes a device flag that
masks the whole update, so the host cannot know how many slots are filled; :meth:`SampleMemory.filled` then
returns every slot, the unused ones with weight 0 (they add nothing to the filter optimiser's objective), and
a new sample goes to the first slot of smallest weight, which is the next unused one.
"""

from __future__ import annotations

import torch
from torch import Tensor


class SampleMemory:
    """Slots of classification features (M, C, H, W), boxes (M, 4) xywh crop pixels and weights (M,)."""

    def __init__(self, size: int, *, init_min_weight: float, sync_free: bool = False) -> None:
        self.size = size
        self.sync_free = sync_free
        self.init_min_weight = init_min_weight
        self.features: Tensor | None = None
        self.boxes: Tensor | None = None
        self.weights: Tensor | None = None
        self.num_init = 0
        self.count = 0

    def initialize(self, features: Tensor, boxes: Tensor) -> None:
        """Store the N initial samples (N, C, H, W) and (N, 4) with equal weights."""
        n = features.shape[0]
        if n > self.size:
            raise ValueError(f"{n} initial samples do not fit a memory of {self.size}")
        if boxes.shape != (n, 4):
            raise ValueError(f"initial boxes must be ({n}, 4) xywh, got {tuple(boxes.shape)}")
        self.features = features.new_zeros((self.size, *features.shape[1:]))
        self.boxes = boxes.new_zeros((self.size, 4))
        self.weights = features.new_zeros(self.size)
        self.features[:n] = features
        self.boxes[:n] = boxes
        # unused slots get a valid box: the optimiser still builds their label maps
        self.boxes[n:] = boxes[:1]
        self.weights[:n] = 1.0 / n
        self.num_init = n
        self.count = n

    def add(self, feature: Tensor, box: Tensor, lr: float | Tensor, learn: Tensor | None = None) -> None:
        """Insert one sample (1, C, H, W) with its (4,) box and learning rate ``lr`` in (0, 1) (a float or a
        () tensor); with ``learn`` (a () bool tensor, sync-free memories only) the memory changes only where
        it is true."""
        if self.weights is None:
            raise RuntimeError("SampleMemory.add before initialize")
        if learn is not None and not self.sync_free:
            raise ValueError("SampleMemory.add: a device 'learn' flag needs a sync_free memory")
        old = self.weights
        w = old * (1.0 - lr)
        if not self.sync_free and self.count < self.size:
            index = torch.full((1,), self.count, dtype=torch.long, device=w.device)  # a fill, not a copy
            self.count += 1
        else:
            rest = w[self.num_init :]
            index = (torch.argmin(rest) + self.num_init).reshape(1)
        # a tensor lr is copied in: index_fill would read a tensor value on the host (a synchronisation)
        value = lr.reshape(1).to(w.dtype) if isinstance(lr, Tensor) else w.new_full((1,), float(lr))
        w = w.index_copy(0, index, value)
        w = w / w.sum()
        init_share = w[: self.num_init].sum()
        # give the initial samples at least init_min_weight in total (no-op when they already have it)
        need = init_share < self.init_min_weight
        scale_init = torch.where(need, self.init_min_weight / init_share.clamp(min=1e-12), 1.0)
        rest_share = (1.0 - init_share).clamp(min=1e-12)
        scale_rest = torch.where(need, (1.0 - self.init_min_weight) / rest_share, 1.0)
        w = torch.cat([w[: self.num_init] * scale_init, w[self.num_init :] * scale_rest])
        feature = feature.to(self.features.dtype)
        box = box.reshape(1, 4).to(self.boxes.dtype)
        if learn is not None:
            w = torch.where(learn, w, old)
            feature = torch.where(learn, feature, self.features.index_select(0, index))
            box = torch.where(learn, box, self.boxes.index_select(0, index))
        self.weights = w
        self.features.index_copy_(0, index, feature)
        self.boxes.index_copy_(0, index, box)

    def filled(self) -> tuple[Tensor, Tensor, Tensor]:
        """The filled slots: features (K, C, H, W), boxes (K, 4), weights (K,) summing to 1 (every slot in a
        sync-free memory, the unused ones with weight 0)."""
        k = self.size if self.sync_free else self.count
        return self.features[:k], self.boxes[:k], self.weights[:k]
