"""Table 1 (markdown) and the study's figures (PNG) from the results dict of :mod:`ltr.regression_1d.study`.

Results layout: ``{setting: {"1"|"2": {"dkl": [...], "dkl_best5": float, "sec_per_epoch": float}}}``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from ltr.regression_1d import paper  # noqa: E402
from ltr.regression_1d.data import generate  # noqa: E402
from ltr.regression_1d.evaluate import GRID, true_distribution  # noqa: E402

BEST_K = 5


def best_k_mean(values: list[float], k: int = BEST_K) -> float:
    """Mean of the k smallest values (all of them if fewer than k)."""
    if not values:
        raise ValueError("no D_KL values to summarise")
    return float(np.mean(sorted(values)[:k]))


def dataset_average(cell: dict[str, dict]) -> float | None:
    """Average over datasets of dkl_best5; None unless both datasets are present."""
    if not all(d in cell for d in ("1", "2")):
        return None
    return (cell["1"]["dkl_best5"] + cell["2"]["dkl_best5"]) / 2


def _fmt(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


def table_markdown(
    results: dict[str, dict[str, dict]], *, runs: int | None = None, epochs: int | None = None
) -> str:
    """Table 1 in the paper's column order: our D_KL (mean of the 5 best runs, averaged over datasets),
    the paper's, the per-dataset values, and seconds per epoch (ours: CPU, per model; paper: GPU)."""
    cols = [s for s in paper.COLUMNS if s in results] + [s for s in results if s not in paper.COLUMNS]
    head = "| | " + " | ".join(paper.COLUMNS.get(s, s) for s in cols) + " |"
    sep = "|---|" + "---|" * len(cols)
    rows = [head, sep]
    ours = [dataset_average(results[s]) for s in cols]
    rows.append("| D_KL ours (avg of datasets) | " + " | ".join(_fmt(v) for v in ours) + " |")
    rows.append("| D_KL paper | " + " | ".join(_fmt(paper.DKL.get(s)) for s in cols) + " |")
    for d in ("1", "2"):
        vals = [results[s][d]["dkl_best5"] if d in results[s] else None for s in cols]
        rows.append(f"| D_KL ours, dataset {d} | " + " | ".join(_fmt(v) for v in vals) + " |")
    for d in ("1", "2"):
        vals = [float(np.median(results[s][d]["dkl"])) if d in results[s] else None for s in cols]
        rows.append(f"| D_KL ours, dataset {d}, median of runs | " + " | ".join(_fmt(v) for v in vals) + " |")
    spe = []
    for s in cols:
        vals = [results[s][d]["sec_per_epoch"] for d in ("1", "2") if d in results[s]]
        spe.append(float(np.mean(vals)) if vals else None)
    rows.append("| s/epoch/model ours (CPU) | " + " | ".join(_fmt(v, 2) for v in spe) + " |")
    rows.append(
        "| s/epoch paper (GPU) | " + " | ".join(_fmt(paper.SEC_PER_EPOCH_GPU.get(s), 2) for s in cols) + " |"
    )
    n_runs = sorted({len(results[s][d]["dkl"]) for s in cols for d in results[s]})
    best = "the" if max(n_runs, default=0) <= BEST_K else f"the {BEST_K} smallest of"
    note = f"\nD_KL: mean of {best} {'/'.join(map(str, n_runs))} runs per dataset"
    if epochs is not None:
        note += f", {epochs} epochs"
    return "\n".join(rows) + note + ".\n"


def _density_image(ax, p: np.ndarray, title: str) -> None:
    """p: (Gx, Gy) row-normalised; drawn with y upwards."""
    ax.imshow(
        p.T, origin="lower", extent=(-3, 3, -3, 3), aspect="auto", cmap="viridis", interpolation="nearest"
    )
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("x")
    ax.set_ylabel("y")


def _downsample(p: np.ndarray, size: int = 512) -> np.ndarray:
    step = max(1, p.shape[0] // size)
    gx, gy = p.shape[0] // step, p.shape[1] // step
    return p[: gx * step, : gy * step].reshape(gx, step, gy, step).sum(axis=(1, 3))


def save_density_figure(log_density: torch.Tensor | np.ndarray, path: Path, title: str) -> Path:
    """PNG of p(y|x; theta) from its (Gx, Gy) log density (rows normalised)."""
    p = np.exp(np.asarray(log_density, dtype=np.float64))
    fig, ax = plt.subplots(figsize=(4, 4), dpi=100)
    _density_image(ax, _downsample(p), title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def save_dataset_figures(dataset: int, out_dir: Path, *, data_seed: int = 0, grid: int = GRID) -> list[Path]:
    """true_p_d<d>.png (true p(y|x)) and data_d<d>.png (the 2000 training points)."""
    p = true_distribution(dataset, grid).numpy()
    paths = [
        save_density_figure(np.log(p), out_dir / f"true_p_d{dataset}.png", f"true p(y|x), dataset {dataset}")
    ]
    x, y = generate(dataset, data_seed=data_seed)
    fig, ax = plt.subplots(figsize=(4, 4), dpi=100)
    ax.scatter(x.numpy(), y.numpy(), s=2, alpha=0.5)
    ax.set_xlim(-3, 3)
    ax.set_ylim(-3, 3)
    ax.set_title(f"training data, dataset {dataset}", fontsize=9)
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    fig.tight_layout()
    path = out_dir / f"data_d{dataset}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return [*paths, path]


def save_sweep_figure(sweep: dict[str, dict[str, float]], path: Path) -> Path:
    """Figure 2: D_KL versus M, ours (solid) and the paper's (dashed). sweep: {setting: {str(M): dkl}}."""
    fig, ax = plt.subplots(figsize=(5, 4), dpi=100)
    for i, (setting, values) in enumerate(sweep.items()):
        color = f"C{i}"
        ms = sorted(int(m) for m in values)
        ax.plot(
            ms,
            [values[str(m)] for m in ms],
            "o-",
            color=color,
            label=f"{paper.COLUMNS.get(setting, setting)}",
        )
        if setting in paper.SWEEP_M:
            pm = sorted(paper.SWEEP_M[setting])
            ax.plot(pm, [paper.SWEEP_M[setting][m] for m in pm], "--", color=color, alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of samples M")
    ax.set_ylabel("D_KL (mean of 5 best, avg of datasets)")
    ax.set_title("D_KL vs M (solid: ours, dashed: paper)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
