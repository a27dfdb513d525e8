"""A train loader for iteration-based training: a fixed number of drawn batches, cut into epochs.

Some runs are specified in optimiser steps, not passes over a dataset (a detection head trained for 60k
iterations on randomly drawn images). :class:`StepLoader` lets :class:`ltr.trainers.Trainer` run them
unchanged: each "epoch" is ``steps_per_epoch`` batches (the last one shorter when ``total_steps`` is not a
multiple), so the per-epoch hooks (summary line, stats, checkpoints) fire every ``steps_per_epoch`` steps.
Batches are drawn lazily, one per step, so a ``draw`` that shares a ``torch.Generator`` with the actor
consumes its numbers in the same interleaved order as a plain ``for`` loop would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class StepLoader(Generic[T]):
    """``total_steps`` batches of ``draw()`` in :attr:`num_epochs` epochs of ``steps_per_epoch``.

    The trainer calls :meth:`set_epoch` (1-based) before each epoch; ``len()`` is that epoch's step count.
    """

    def __init__(self, draw: Callable[[], T], *, total_steps: int, steps_per_epoch: int) -> None:
        if total_steps < 0:
            raise ValueError(f"total_steps must be >= 0, got {total_steps}")
        if steps_per_epoch < 1:
            raise ValueError(f"steps_per_epoch must be >= 1, got {steps_per_epoch}")
        self.draw = draw
        self.total_steps = total_steps
        self.steps_per_epoch = steps_per_epoch
        self.epoch = 1

    @property
    def num_epochs(self) -> int:
        """Epochs needed for ``total_steps`` (the trainer's ``epochs``; 0 for no steps)."""
        return -(-self.total_steps // self.steps_per_epoch)

    def set_epoch(self, epoch: int) -> None:
        if not 1 <= epoch <= self.num_epochs:
            raise ValueError(f"epoch {epoch} is outside 1..{self.num_epochs}")
        self.epoch = epoch

    def __len__(self) -> int:
        done = (self.epoch - 1) * self.steps_per_epoch
        return min(self.steps_per_epoch, self.total_steps - done)

    def __iter__(self) -> Iterator[T]:
        for _ in range(len(self)):
            yield self.draw()
