"""Loader: a torch DataLoader over a :class:`~ltr.data.sampler.TrackingSampler` with per-epoch indices.

- :class:`EpochSampler` yields indices ``epoch * n + i``; the sampler seeds each sample from
  (seed, rank, index), so epochs differ, workers never repeat each other, and the batches do not depend on
  the number of workers. ``set_epoch`` works with persistent workers too (the index carries the epoch).
- :func:`worker_init` seeds each worker's global RNGs (``random``, numpy, torch) with
  ``seed + 1000 * rank + worker_id`` mixed with the epoch, for any third-party code that uses them, and
  limits torch to one thread per worker.
- :func:`collate_frames` stacks the per-sample (S, ...) tensors into (S, B, ...) (the batch contract in
  :mod:`ltr.data.processing`).
- Memory is pinned when the target device is CUDA.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from collections.abc import Sequence as SequenceABC

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Sampler

from ltr.data.config import DataConfig
from ltr.data.sampler import TrackingSampler
from ltr.dataset.base import SequenceDataset

__all__ = [
    "EpochSampler",
    "TrainingLoader",
    "build_loader",
    "collate_frames",
    "worker_init",
    "worker_seed",
]


def collate_frames(samples: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Stack B per-sample dicts of (S, ...) tensors into (S, B, ...) along a new dim 1."""
    if not samples:
        raise ValueError("collate_frames got an empty list of samples")
    keys = samples[0].keys()
    for i, s in enumerate(samples):
        if s.keys() != keys:
            raise ValueError(f"sample {i} has keys {sorted(s.keys())}, expected {sorted(keys)}")
    in_worker = torch.utils.data.get_worker_info() is not None
    out = {}
    for k in keys:
        parts = [s[k] for s in samples]
        if in_worker:  # stack straight into shared memory: the batch then travels to the parent uncopied
            first = parts[0]
            shape = (first.shape[0], len(parts), *first.shape[1:])
            buffer = torch.empty(shape, dtype=first.dtype).share_memory_()
            out[k] = torch.stack(parts, dim=1, out=buffer)
        else:
            out[k] = torch.stack(parts, dim=1)
    return out


class EpochSampler(Sampler[int]):
    """Indices ``epoch * num_samples + i`` for i in range(num_samples), in order (every index is random)."""

    def __init__(self, num_samples: int, epoch: int = 0) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        self.num_samples = num_samples
        self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        start = self.epoch * self.num_samples
        return iter(range(start, start + self.num_samples))

    def __len__(self) -> int:
        return self.num_samples


def worker_seed(base_seed: int, rank: int, worker_id: int, epoch: int = 0) -> int:
    """Global-RNG seed of one worker: base_seed + 1000 * rank + worker_id, mixed with the epoch."""
    return (base_seed + 1000 * rank + worker_id + 1_000_003 * epoch) % (2**32)


def worker_init(worker_id: int, *, base_seed: int, rank: int, epoch: int) -> None:
    """DataLoader ``worker_init_fn``: seed ``random``/numpy/torch and use one torch thread per worker.

    OpenCV's thread count is deliberately left alone: ``cv2.setNumThreads`` in a forked worker hangs when the
    parent process had already used OpenCV's thread pool (observed with opencv-contrib-python-headless 5.0
    and the default fork start method).
    """
    seed = worker_seed(base_seed, rank, worker_id, epoch)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(1)


class TrainingLoader:
    """Batches of the batch contract from a :class:`TrackingSampler`, one epoch per iteration.

    Args:
        sampler: the sample source (its ``len`` is the samples per epoch of this rank).
        batch_size: samples per batch B; the last partial batch is dropped unless ``drop_last=False``.
        num_workers: worker processes (0 = load in the calling process).
        device: where the batches go; memory is pinned when it is CUDA (``pin_memory=None``).
        persistent_workers: keep workers alive between epochs (safe: the epoch travels in the indices).
        multiprocessing_context: worker start method (``"fork"``, ``"spawn"``, ``"forkserver"``); default the
            platform's. Spawned workers need a picklable dataset (frame loaders included).
    """

    def __init__(
        self,
        sampler: TrackingSampler,
        *,
        batch_size: int,
        num_workers: int = 0,
        device: str | torch.device = "cpu",
        pin_memory: bool | None = None,
        drop_last: bool = True,
        persistent_workers: bool = False,
        prefetch_factor: int | None = None,
        multiprocessing_context: str | None = None,
        epoch: int = 0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_workers < 0:
            raise ValueError(f"num_workers must be >= 0, got {num_workers}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.index_sampler = EpochSampler(len(sampler), epoch)
        if pin_memory is None:
            pin_memory = torch.device(device).type == "cuda" and torch.cuda.is_available()
        extra = {}
        if num_workers > 0:
            extra["persistent_workers"] = persistent_workers
            extra["worker_init_fn"] = functools.partial(
                worker_init, base_seed=sampler.seed, rank=sampler.rank, epoch=epoch
            )
            if prefetch_factor is not None:
                extra["prefetch_factor"] = prefetch_factor
            if multiprocessing_context is not None:
                extra["multiprocessing_context"] = multiprocessing_context
        self.loader = DataLoader(
            sampler,
            batch_size=batch_size,
            sampler=self.index_sampler,
            num_workers=num_workers,
            collate_fn=collate_frames,
            pin_memory=pin_memory,
            drop_last=drop_last,
            **extra,
        )

    @property
    def epoch(self) -> int:
        return self.index_sampler.epoch

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch whose samples the next iteration yields."""
        self.index_sampler.set_epoch(epoch)
        init = self.loader.worker_init_fn
        if isinstance(init, functools.partial):
            self.loader.worker_init_fn = functools.partial(init.func, **{**init.keywords, "epoch": epoch})

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        return iter(self.loader)


def build_loader(
    config: DataConfig,
    datasets: SequenceABC[SequenceDataset] | None = None,
    *,
    training: bool = True,
    device: str | torch.device = "cpu",
    rank: int | None = None,
    world_size: int | None = None,
    epoch: int = 0,
    persistent_workers: bool = False,
) -> TrainingLoader:
    """The train (or, ``training=False``, validation) loader of ``config``.

    ``datasets`` default to ``config.datasets`` (train) / ``config.val_datasets`` (val) from the registry.
    Batch size and worker count come from the config.
    """
    if datasets is None:
        from ltr.dataset.registry import datasets_from_specs

        datasets = datasets_from_specs(config.datasets if training else config.val_datasets)
    sampler = TrackingSampler.from_config(
        config, datasets, training=training, rank=rank, world_size=world_size
    )
    return TrainingLoader(
        sampler,
        batch_size=config.batch_size,
        num_workers=config.num_workers,
        device=device,
        drop_last=training,
        persistent_workers=persistent_workers,
        epoch=epoch,
    )
