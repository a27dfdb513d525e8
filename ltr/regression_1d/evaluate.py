"""D_KL(p(y|x) || p(y|x; theta)) on the paper's grid (appendix B.3).

x and y both take ``grid`` values in linspace(-3, 3). For each x: p_model = softmax over the y grid of f
(computed as a float64 log-softmax), p_true = (pdf + 1e-30) normalised over the y grid, and
D_KL = sum_y p_true log(p_true / p_model). The result is the mean over the x grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ltr.models.toy1d import Toy1DEnsemble, Toy1DNet
from ltr.regression_1d.data import X_RANGE, true_pdf

GRID = 2048
PDF_FLOOR = 1e-30


def grid_axis(grid: int = GRID) -> np.ndarray:
    """The (grid,) float64 axis shared by x and y: linspace(-3, 3, grid)."""
    return np.linspace(X_RANGE[0], X_RANGE[1], grid)


def true_distribution(dataset: int, grid: int = GRID) -> Tensor:
    """p_true on the grid: (grid_x, grid_y) float64, each row sums to 1 (pdf + 1e-30, then normalised)."""
    axis = grid_axis(grid)
    p = true_pdf(dataset, axis[:, None], axis[None, :]) + PDF_FLOOR
    p /= p.sum(axis=1, keepdims=True)
    return torch.from_numpy(p)


def dkl_from_log_model(p_true: Tensor, log_p_model: Tensor) -> Tensor:
    """Mean over x of sum_y p_true log(p_true / p_model).

    Args:
        p_true: (Gx, Gy) rows summing to 1.
        log_p_model: (..., Gx, Gy) log of row-normalised model distributions.
    Returns:
        (...) D_KL averaged over the Gx rows.
    """
    p_true = p_true.to(log_p_model.dtype)
    return (p_true * (torch.log(p_true) - log_p_model)).sum(-1).mean(-1)


@torch.no_grad()
def ensemble_log_density(ens: Toy1DEnsemble, grid: int = GRID, *, points_per_chunk: int = 1 << 21) -> Tensor:
    """log p(y|x; theta) of every member on the grid: (R, Gx, Gy) float64, rows normalised over y."""
    param = next(ens.parameters())
    r = ens.num_models
    axis = torch.from_numpy(grid_axis(grid)).to(device=param.device, dtype=param.dtype)
    out = torch.empty(r, grid, grid, dtype=torch.float64, device=param.device)
    xs_per_chunk = max(1, points_per_chunk // (r * grid))
    y = axis.view(1, 1, grid, 1)
    for start in range(0, grid, xs_per_chunk):
        x = axis[start : start + xs_per_chunk]
        cx = x.shape[0]
        feat = ens.x_features(x.view(1, cx, 1).expand(r, cx, 1))
        scores = ens.score_from_features(feat, y.expand(r, cx, grid, 1))
        out[:, start : start + cx] = torch.log_softmax(scores.double(), dim=-1)
    return out


@dataclass
class Evaluation:
    """dkl: (R,) one D_KL per member; best: index of the smallest; log_density_best: (Gx, Gy) its log p."""

    dkl: list[float]
    best: int
    log_density_best: Tensor


def evaluate_ensemble(ens: Toy1DEnsemble, dataset: int, grid: int = GRID) -> Evaluation:
    """D_KL of every member of ``ens`` against the true p(y|x) of ``dataset``."""
    p_true = true_distribution(dataset, grid)
    dkls = []
    best_val, best, best_log = float("inf"), 0, None
    # One member at a time keeps the (Gx, Gy) float64 arrays to a handful.
    for r in range(ens.num_models):
        member = Toy1DEnsemble.from_models([ens.member(r)]).to(next(ens.parameters()).device)
        log_p = ensemble_log_density(member, grid)[0].cpu()
        value = float(dkl_from_log_model(p_true, log_p))
        dkls.append(value)
        if value < best_val or best_log is None:
            best_val, best, best_log = value, r, log_p
    return Evaluation(dkls, best, best_log)


def evaluate_model(model: Toy1DNet, dataset: int, grid: int = GRID) -> tuple[float, Tensor]:
    """(D_KL, log p(y|x; theta) (Gx, Gy)) of a single model."""
    ens = Toy1DEnsemble.from_models([model]).to(next(model.parameters()).device)
    result = evaluate_ensemble(ens, dataset, grid)
    return result.dkl[0], result.log_density_best
