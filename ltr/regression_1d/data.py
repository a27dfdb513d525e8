"""The two synthetic 1D datasets of appendix B and their true conditional densities p(y | x).

Dataset 1: x ~ U[-3, 3].
    x < 0:  0.8 N(y; sin x, 0.075^2) + 0.2 N(y; -sin x, 0.075^2)
    x >= 0: y = z - 1 with z ~ LogNormal(mu=0, sigma=0.25), i.e. p(y | x) = lognormal pdf at y + 1.
Dataset 2: x ~ U[-3, 3], y ~ N(sin x, sigma(x)^2), sigma(x) = 0.15 / (1 + exp(-x)).

The reference publishes no data files and sets no seeds; here the training set of dataset d is a pure
function of (d, data_seed).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

DATASETS: tuple[int, ...] = (1, 2)
NUM_TRAIN = 2000
X_RANGE = (-3.0, 3.0)

MIX_STD = 0.075  # dataset 1, x < 0 (0.15 / (1 + 1) in the reference)
MIX_WEIGHT = 0.8  # weight of the +sin(x) component
LOGNORM_SIGMA = 0.25  # dataset 1, x >= 0
SIGMA2_SCALE = 0.15  # dataset 2


def check_dataset(dataset: int) -> int:
    """``dataset`` as an int, or a ValueError naming the valid choices."""
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}, got {dataset!r}")
    return int(dataset)


def derive_seed(*keys: int | str) -> int:
    """A 63-bit seed that is a deterministic function of ``keys`` (ints and strings), for torch generators."""
    ints = [k if isinstance(k, int) else int.from_bytes(k.encode(), "little") % (2**32) for k in keys]
    if any(k < 0 for k in ints):
        raise ValueError(f"seed keys must be non-negative, got {keys}")
    return int(
        np.random.SeedSequence(ints).generate_state(2, dtype=np.uint32).astype(np.uint64) @ [1, 2**32]
    ) % (2**63)


def generator(*keys: int | str) -> torch.Generator:
    """A CPU torch generator seeded by :func:`derive_seed` of ``keys``."""
    return torch.Generator().manual_seed(derive_seed(*keys))


def dataset2_sigma(x: np.ndarray | Tensor) -> np.ndarray | Tensor:
    """sigma(x) = 0.15 / (1 + exp(-x)), elementwise (numpy or torch)."""
    if isinstance(x, Tensor):
        return SIGMA2_SCALE * torch.sigmoid(x)
    return SIGMA2_SCALE / (1.0 + np.exp(-x))


def generate(dataset: int, *, num: int = NUM_TRAIN, data_seed: int = 0) -> tuple[Tensor, Tensor]:
    """The training set of ``dataset``: x (num, 1), y (num, 1), float32, drawn with a seeded generator."""
    dataset = check_dataset(dataset)
    rng = np.random.default_rng(derive_seed(dataset, data_seed, "data"))
    x = rng.uniform(X_RANGE[0], X_RANGE[1], size=num)
    if dataset == 1:
        sign = np.where(rng.uniform(size=num) < MIX_WEIGHT, 1.0, -1.0)
        y_mix = sign * np.sin(x) + MIX_STD * rng.standard_normal(num)
        y_lognorm = rng.lognormal(mean=0.0, sigma=LOGNORM_SIGMA, size=num) - 1.0
        y = np.where(x < 0, y_mix, y_lognorm)
    else:
        y = np.sin(x) + dataset2_sigma(x) * rng.standard_normal(num)
    as_t = lambda a: torch.from_numpy(a.astype(np.float32)).unsqueeze(1)  # noqa: E731
    return as_t(x), as_t(y)


def _normal_pdf(y: np.ndarray, mean: np.ndarray, std: np.ndarray | float) -> np.ndarray:
    z = (y - mean) / std
    return np.exp(-0.5 * z * z) / (std * math.sqrt(2 * math.pi))


def true_pdf(dataset: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """p(y | x) of ``dataset``, float64, for broadcastable x and y (e.g. (G, 1) and (1, G) -> (G, G))."""
    dataset = check_dataset(dataset)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if dataset == 2:
        return _normal_pdf(y, np.sin(x), dataset2_sigma(x))
    mix = MIX_WEIGHT * _normal_pdf(y, np.sin(x), MIX_STD) + (1 - MIX_WEIGHT) * _normal_pdf(
        y, -np.sin(x), MIX_STD
    )
    z = y + 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_z = np.log(np.where(z > 0, z, 1.0))
        lognorm = np.where(
            z > 0,
            np.exp(-0.5 * (log_z / LOGNORM_SIGMA) ** 2) / (z * LOGNORM_SIGMA * math.sqrt(2 * math.pi)),
            0.0,
        )
    return np.where(x < 0, mix, lognorm)
