"""Shared pieces of the fused-kernel tests: random ensembles and the per-parameter gradient check."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ltr.models.toy1d import Toy1DEnsemble


def random_ensemble(r: int, seed: int, scale: float = 2.0) -> Toy1DEnsemble:
    """Random weights, larger than the default init so that the tanh units reach their curved range."""
    ens = Toy1DEnsemble(r)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in ens.parameters():
            p.copy_((torch.rand(p.shape, generator=g) * 2 - 1) * scale / p.shape[1] ** 0.5)
    return ens


def assert_grads_close(
    names: Sequence[str], got: Sequence[Tensor], want: Sequence[Tensor], rel: float = 2e-5
) -> None:
    """Each float32 gradient within ``rel`` x max(|reference|, 1e-3) of its float64 reference, by name."""
    for name, g, w in zip(names, got, want, strict=True):
        scale = max(w.abs().max().item(), 1e-3)
        assert (g.double() - w).abs().max().item() <= rel * scale, name
