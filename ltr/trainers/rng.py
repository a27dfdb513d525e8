"""Seeding and random-number-generator state as plain tensors (safe to store in a checkpoint).

:func:`capture_rng_state` returns a flat ``dict[str, Tensor]`` with the same keys, shapes and dtypes in every
process of a run, so the states of all ranks can be gathered with one collective per key and restored with
:func:`restore_rng_state`. Covered: Python ``random``, NumPy's legacy global generator, torch's CPU generator,
the current CUDA device's generator (when CUDA is initialised) and any named ``torch.Generator`` passed in
(e.g. a data loader's). Dtypes are uint8 / int64 / float64 only, which every collective backend supports.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor


def seed_everything(seed: int) -> None:
    """Seed Python ``random``, NumPy's global generator and torch (CPU and all CUDA devices)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def capture_rng_state(generators: Mapping[str, torch.Generator] | None = None) -> dict[str, Tensor]:
    """Every global RNG state of this process (plus ``generators``) as CPU tensors."""
    version, py_state, gauss_next = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    if kind != "MT19937":
        raise RuntimeError(f"unexpected NumPy bit generator {kind!r}")
    state = {
        "torch": torch.get_rng_state(),
        "python_version": torch.tensor(version, dtype=torch.int64),
        "python_state": torch.tensor(py_state, dtype=torch.int64),
        "python_has_gauss": torch.tensor(int(gauss_next is not None), dtype=torch.int64),
        "python_gauss": torch.tensor(0.0 if gauss_next is None else gauss_next, dtype=torch.float64),
        "numpy_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
        "numpy_pos": torch.tensor(int(pos), dtype=torch.int64),
        "numpy_has_gauss": torch.tensor(int(has_gauss), dtype=torch.int64),
        "numpy_gauss": torch.tensor(float(cached), dtype=torch.float64),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    for name, gen in (generators or {}).items():
        state[f"generator/{name}"] = gen.get_state()
    return state


def restore_rng_state(
    state: Mapping[str, Tensor], generators: Mapping[str, torch.Generator] | None = None
) -> None:
    """Undo everything since :func:`capture_rng_state` returned ``state``; missing keys raise KeyError."""
    torch.set_rng_state(state["torch"].to(device="cpu", dtype=torch.uint8))
    gauss = float(state["python_gauss"]) if bool(state["python_has_gauss"]) else None
    py_state = tuple(int(v) for v in state["python_state"].tolist())
    random.setstate((int(state["python_version"]), py_state, gauss))
    np.random.set_state(
        (
            "MT19937",
            state["numpy_keys"].numpy().astype(np.uint32),
            int(state["numpy_pos"]),
            int(state["numpy_has_gauss"]),
            float(state["numpy_gauss"]),
        )
    )
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"].to(device="cpu", dtype=torch.uint8))
    for name, gen in (generators or {}).items():
        gen.set_state(state[f"generator/{name}"].to(device="cpu", dtype=torch.uint8))
