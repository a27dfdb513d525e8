"""The classifier's sample memory: training features, their target boxes and weights, as in pytracking's DiMP.

Slots 0..N-1 hold the N initial (augmented) samples, each with weight 1/N. A new sample goes into the next free
slot, or, once the memory is full, replaces the non-initial sample of smallest weight. Weights follow the
reference's exponential forgetting: the first update divides every weight by (1 - lr) and gives the new sample
lr; later updates give the new sample the previous newest weight / (1 - lr). The weights are then normalised to
sum 1, and if the initial samples hold less than ``init_min_weight`` in total, all weights are divided by
``init_min_weight`` + the others' sum and each initial sample gets ``init_min_weight / N`` (so the total is then
not exactly 1, as in the reference).

The boxes and weights are kept on the host whatever the features' device: the weights' update is a handful of
operations on ``size`` numbers with two decisions (which slot, whether the minimum applies), each of which
would otherwise wait for the device, and a box comes from the tracker's host state every frame while the
filter optimisation reads them only every few frames; :meth:`SampleMemory.filled` sends both along without
waiting.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from pytracking.tracker.dimp.frames import upload


class SampleMemory:
    """``size`` slots of classification features (C, H, W), and boxes (4,) xywh crop pixels and weights on the
    host.

    Args:
        size: number of slots.
        init_min_weight: total weight kept by the initial samples (None or 0: no minimum; then the oldest
            sample may also be replaced, as in the reference).
    """

    def __init__(self, size: int, *, init_min_weight: float | None) -> None:
        self.size = size
        self.init_min_weight = init_min_weight or None
        self.features: Tensor | None = None
        self.boxes: Tensor | None = None
        self.weights: Tensor | None = None
        self.num_init = 0
        #: number of samples ever stored (grows past ``size``; the reference's ``num_stored_samples``)
        self.num_stored = 0
        self.previous_index: int | None = None

    def initialize(self, features: Tensor, boxes: Tensor) -> None:
        """Store the N initial samples (N, C, H, W) with boxes (N, 4) (any device) and equal weights 1/N."""
        n = features.shape[0]
        if n > self.size:
            raise ValueError(f"{n} initial samples do not fit a memory of {self.size}")
        if boxes.shape != (n, 4):
            raise ValueError(f"initial boxes must be ({n}, 4) xywh, got {tuple(boxes.shape)}")
        self.features = features.new_zeros((self.size, *features.shape[1:]))
        self.features[:n] = features
        self.boxes = torch.zeros((self.size, 4), dtype=boxes.dtype)
        self.boxes[:n] = boxes.cpu()
        self.weights = torch.zeros(self.size, dtype=features.dtype)
        self.weights[:n] = 1.0 / n
        self.num_init = n
        self.num_stored = n
        self.previous_index = None

    def add(self, feature: Tensor, box: Tensor, lr: float) -> None:
        """Insert one sample (1, C, H, W) or (C, H, W) with its (4,) box (host) and learning rate ``lr`` in
        (0, 1] (:func:`add_samples` for one memory)."""
        add_samples([self], feature.reshape(1, *feature.shape[-3:]), box.reshape(1, 4), [lr])

    @property
    def count(self) -> int:
        """The number of samples held (at most ``size``): slots 0..count-1."""
        return min(self.num_stored, self.size)

    def filled(self, count: int | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """The first ``count`` slots (default :attr:`count`, the samples held): features (count, C, H, W),
        boxes (count, 4), weights (count,), all on the features' device. Slots past the samples held have
        zero features, boxes and weights, so that memories of different fill can be optimised as one batch."""
        if self.weights is None or self.features is None or self.boxes is None:
            raise RuntimeError("SampleMemory.filled before initialize")
        k = self.count if count is None else count
        if not 0 <= k <= self.size:
            raise ValueError(f"SampleMemory.filled: count must be within 0..{self.size}, got {k}")
        device = self.features.device
        return self.features[:k], upload(self.boxes[:k], device), upload(self.weights[:k], device)


def add_samples(
    memories: Sequence[SampleMemory], features: Tensor, boxes: Tensor, lrs: Sequence[float]
) -> None:
    """Insert one sample into each memory: ``features[i]`` (C, H, W) with its box ``boxes[i]`` (4,) (host) and
    learning rate ``lrs[i]`` in (0, 1] into ``memories[i]`` (memories of one tracker's parameters: the same
    ``size``, number of initial samples and ``init_min_weight``).

    The weights of all memories are updated as rows of one tensor, each row by the same float32 operations as
    its memory alone (module docstring for the rule); the features and boxes are written per memory."""
    if any(m.weights is None or m.features is None or m.boxes is None for m in memories):
        raise RuntimeError("SampleMemory.add before initialize")
    lead = memories[0]
    size, num_init, least = lead.size, lead.num_init, lead.init_min_weight
    w = torch.stack([m.weights for m in memories])  # type: ignore[misc]  # (n, size)
    keep = torch.tensor([1 - lr for lr in lrs], dtype=w.dtype)  # what the old weights keep
    new = torch.tensor(list(lrs), dtype=w.dtype)
    # the slot: the next free one, else the (non-initial, with a minimum) sample of least weight
    start = 0 if least is None else num_init
    full = any(m.num_stored >= size for m in memories)
    lightest = (torch.argmin(w[:, start:], dim=1) + start).tolist() if full else []
    restart, fresh, chained, index = [], [], [], []
    for i, (m, lr) in enumerate(zip(memories, lrs, strict=True)):
        if m.num_stored == 0 or lr == 1:
            restart.append(i)
            index.append(0)
            continue
        index.append(m.num_stored if m.num_stored < size else lightest[i])
        (fresh if m.previous_index is None else chained).append(i)
    if restart:
        w[restart] = 0
        w[restart, 0] = 1
    if fresh:  # the first update: every weight divided by (1 - lr), the new sample lr
        rows = torch.tensor(fresh)
        w[rows] = w[rows] / keep[rows, None]
        w[rows, [index[i] for i in fresh]] = new[rows]
    if chained:  # later updates: the newest weight / (1 - lr)
        rows = torch.tensor(chained)
        previous = [memories[i].previous_index for i in chained]
        w[rows, [index[i] for i in chained]] = w[rows, previous] / keep[rows]
    w /= w.sum(dim=1, keepdim=True)
    if least is not None:
        low = (w[:, :num_init].sum(dim=1) < least).nonzero().flatten()
        if low.numel():
            w[low] = w[low] / (least + w[low, num_init:].sum(dim=1))[:, None]
            w[low, :num_init] = least / num_init
    rows = zip(memories, index, w.unbind(0), features.unbind(0), boxes.unbind(0), strict=True)
    for m, slot, weights, sample, box in rows:
        m.weights = weights
        m.previous_index = slot
        m.features[slot] = sample  # type: ignore[index]
        m.boxes[slot] = box  # type: ignore[index]
        m.num_stored += 1
