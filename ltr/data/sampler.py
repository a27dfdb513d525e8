"""The training sampler: dataset by weight -> sequence -> train/test frames -> processed sample.

Frame selection (DiMP "causal" mode, the reference's rules):

- A video sequence is used only if it has ``> 2 * (S_tr + S_te)`` visible frames (> 12 for 3 + 3) and at
  least ``min_sequence_length`` (20) frames; otherwise another sequence is drawn.
- A base frame is drawn among the visible frames in [S_tr - 1, n - S_te); S_tr - 1 more train frames among
  the visible frames in [base - gap, base); S_te test frames among the visible frames in
  [base + 1, base + gap), all with replacement, gap = max_gap at first. When a range has no visible frame,
  gap grows by ``gap_increase`` and a new base is drawn. So every train frame precedes every test frame
  and train frame 0 is the base (the latest train frame).
- Image datasets (``is_video=False``, COCO) repeat their single frame as every train and test frame.

Randomness: sample ``index`` draws everything from generators seeded with
``SeedSequence([seed, rank, index])``; :class:`ltr.data.loader.EpochSampler` feeds indices
``epoch * len(sampler) + i``. Samples therefore differ between epochs and ranks, never repeat across the
workers of a rank, and do not depend on the number of workers (the same seed gives the same batches with
0, 1 or 8 workers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from ltr.data.config import DataConfig
from ltr.data.processing import DiMPProcessing, FrameSet
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset

__all__ = ["FrameSelection", "TrackingSampler", "current_rank", "sample_visible_ids", "select_frames"]


@dataclass(frozen=True)
class FrameSelection:
    """Which frames one sample uses: 0-based frame ids, train[0] the base frame; ``gap`` the final max gap."""

    dataset: str
    sequence: str
    train_ids: tuple[int, ...]
    test_ids: tuple[int, ...]
    gap: int


def current_rank() -> tuple[int, int]:
    """(rank, world_size) of the initialised torch.distributed process group, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def sample_visible_ids(
    visible: np.ndarray, num_ids: int, lo: int, hi: int, rng: np.random.Generator
) -> list[int] | None:
    """``num_ids`` visible frame ids drawn with replacement from [lo, hi) (clipped to the sequence).

    Returns [] for ``num_ids == 0`` and None when the range holds no visible frame.
    """
    if num_ids == 0:
        return []
    lo, hi = max(lo, 0), min(hi, len(visible))
    if hi <= lo:
        return None
    candidates = np.flatnonzero(visible[lo:hi]) + lo
    if len(candidates) == 0:
        return None
    return [int(i) for i in rng.choice(candidates, size=num_ids, replace=True)]


def select_frames(
    visible: np.ndarray,
    num_train: int,
    num_test: int,
    max_gap: int,
    gap_increase: int,
    rng: np.random.Generator,
    *,
    max_attempts: int = 1000,
) -> tuple[list[int], list[int], int] | None:
    """Causal train/test frame ids of one video (module docstring), or None if none are found.

    Args:
        visible: (n,) bool per-frame visibility.

    Returns:
        (train_ids, test_ids, gap): train_ids[0] is the base frame; all train ids <= base < all test ids and
        every id within ``gap`` of the base.
    """
    n = len(visible)
    gap = max_gap
    for _ in range(max_attempts):
        base = sample_visible_ids(visible, 1, num_train - 1, n - num_test, rng)
        if base is None:
            return None
        b = base[0]
        prev = sample_visible_ids(visible, num_train - 1, b - gap, b, rng)
        test = None if prev is None else sample_visible_ids(visible, num_test, b + 1, b + gap, rng)
        if test is not None:
            return base + prev, test, gap
        gap += gap_increase
    return None


class TrackingSampler(Dataset):
    """Map-style dataset of processed training samples (see the module docstring).

    Args:
        datasets: the sequence datasets to draw from.
        processing: callable ``(FrameSet, np.random.Generator, torch.Generator) -> dict`` (normally
            :class:`~ltr.data.processing.DiMPProcessing`).
        samples_per_epoch: samples per epoch over ALL ranks; each rank serves ``samples_per_epoch //
            world_size`` of them (``len(self)``).
        weights: dataset sampling weights (default equal).
        seed: base seed; rank / world_size: default from torch.distributed (0 / 1 without a process group).
    """

    def __init__(
        self,
        datasets: SequenceABC[SequenceDataset],
        processing: Callable[[FrameSet, np.random.Generator, torch.Generator], dict],
        *,
        samples_per_epoch: int,
        weights: SequenceABC[float] | None = None,
        num_train_frames: int = 3,
        num_test_frames: int = 3,
        max_gap: int = 200,
        gap_increase: int = 5,
        min_sequence_length: int = 20,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        max_sequence_attempts: int = 1000,
        sequence_cache_size: int = 4096,
    ) -> None:
        if not datasets:
            raise ValueError("TrackingSampler needs at least one dataset")
        weights = [1.0] * len(datasets) if weights is None or len(weights) == 0 else list(weights)
        if len(weights) != len(datasets):
            raise ValueError(f"got {len(weights)} dataset weights for {len(datasets)} datasets")
        w = np.asarray(weights, dtype=np.float64)
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError(f"dataset weights must be >= 0 with a positive sum, got {list(weights)}")
        if gap_increase < 1 or max_gap < 1:
            raise ValueError(f"max_gap ({max_gap}) and gap_increase ({gap_increase}) must be >= 1")
        default_rank, default_world = current_rank()
        self.rank = default_rank if rank is None else rank
        self.world_size = default_world if world_size is None else world_size
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world size {self.world_size}")
        self.datasets = list(datasets)
        self.probs = w / w.sum()
        self.processing = processing
        self.samples_per_epoch = samples_per_epoch
        self.num_train_frames = num_train_frames
        self.num_test_frames = num_test_frames
        self.max_gap = max_gap
        self.gap_increase = gap_increase
        self.min_sequence_length = min_sequence_length
        self.seed = seed
        self.max_sequence_attempts = max_sequence_attempts
        self._names = [d.sequence_names() for d in self.datasets]
        for d, names in zip(self.datasets, self._names, strict=True):
            if not names:
                raise DatasetError(f"dataset {d.name!r} has no sequences")
        self._cache: OrderedDict[tuple[int, str], Sequence] = OrderedDict()
        self._cache_size = sequence_cache_size

    def __getstate__(self) -> dict:
        # workers get the sampler without the parent's sequence cache (smaller pickles, picklable with
        # in-memory frame loaders that were never used in the parent)
        state = self.__dict__.copy()
        state["_cache"] = OrderedDict()
        return state

    @classmethod
    def from_config(
        cls,
        config: DataConfig,
        datasets: SequenceABC[SequenceDataset],
        *,
        training: bool = True,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> TrackingSampler:
        """The sampler of ``config`` over ``datasets`` (train: augmented, config weights; val: plain)."""
        weights = config.dataset_weights if training else None
        return cls(
            datasets,
            DiMPProcessing(config, augment=training),
            samples_per_epoch=config.samples_per_epoch if training else config.val_samples_per_epoch,
            weights=weights,
            num_train_frames=config.num_train_frames,
            num_test_frames=config.num_test_frames,
            max_gap=config.max_gap,
            gap_increase=config.gap_increase,
            min_sequence_length=config.min_sequence_length,
            seed=config.seed if training else config.seed + 7919,
            rank=rank,
            world_size=world_size,
        )

    def __len__(self) -> int:
        return self.samples_per_epoch // self.world_size

    def generators(self, index: int) -> tuple[np.random.Generator, torch.Generator]:
        """The numpy and torch generators of sample ``index`` (seeded from (seed, rank, index))."""
        if index < 0:
            raise IndexError(f"sample index must be >= 0, got {index}")
        np_ss, torch_ss = np.random.SeedSequence([self.seed, self.rank, index]).spawn(2)
        torch_seed = int(torch_ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
        return np.random.default_rng(np_ss), torch.Generator().manual_seed(torch_seed)

    def _sequence(self, ds_index: int, name: str) -> Sequence:
        key = (ds_index, name)
        seq = self._cache.get(key)
        if seq is None:
            seq = self.datasets[ds_index].get_sequence(name)
            self._cache[key] = seq
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return seq

    def _usable(self, seq: Sequence, is_video: bool) -> bool:
        if not is_video:
            return bool(seq.visible.any())
        needed = 2 * (self.num_train_frames + self.num_test_frames)
        return int(seq.visible.sum()) > needed and len(seq) >= self.min_sequence_length

    def select(self, rng: np.random.Generator) -> tuple[Sequence, FrameSelection]:
        """Draw a dataset, a usable sequence and its frames."""
        ds_index = int(rng.choice(len(self.datasets), p=self.probs))
        dataset = self.datasets[ds_index]
        names = self._names[ds_index]
        is_video = getattr(dataset, "is_video", True)
        for _ in range(self.max_sequence_attempts):
            seq = self._sequence(ds_index, names[int(rng.integers(len(names)))])
            if not self._usable(seq, is_video):
                continue
            if not is_video:
                frame = int(np.flatnonzero(seq.visible)[0])
                sel = FrameSelection(
                    dataset.name,
                    seq.name,
                    (frame,) * self.num_train_frames,
                    (frame,) * self.num_test_frames,
                    0,
                )
                return seq, sel
            found = select_frames(
                seq.visible, self.num_train_frames, self.num_test_frames, self.max_gap, self.gap_increase, rng
            )
            if found is not None:
                train, test, gap = found
                return seq, FrameSelection(dataset.name, seq.name, tuple(train), tuple(test), gap)
        raise DatasetError(
            f"dataset {dataset.name!r}: no usable sequence in {self.max_sequence_attempts} draws "
            f"(a video needs > {2 * (self.num_train_frames + self.num_test_frames)} visible frames and "
            f">= {self.min_sequence_length} frames; an image needs a visible box)"
        )

    def load_frames(self, seq: Sequence, sel: FrameSelection) -> FrameSet:
        """Read the selected frames (each distinct frame once) and their boxes."""
        cache = {i: seq.frame(i) for i in sorted(set(sel.train_ids + sel.test_ids))}
        return FrameSet(
            train_images=[cache[i] for i in sel.train_ids],
            train_boxes=seq.boxes[list(sel.train_ids)],
            test_images=[cache[i] for i in sel.test_ids],
            test_boxes=seq.boxes[list(sel.test_ids)],
        )

    def __getitem__(self, index: int) -> dict:
        rng, gen = self.generators(int(index))
        seq, sel = self.select(rng)
        return self.processing(self.load_frames(seq, sel), rng, gen)
