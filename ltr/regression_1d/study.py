"""The 1D regression study: R runs per (method, dataset), D_KL, results.json, table.md, figures, the M sweep.

Output directory layout::

    results.json            {setting: {"1"|"2": {"dkl": [R values], "dkl_best5", "sec_per_epoch"}}}
    table.md                Table 1 layout, ours beside the paper's
    cells/<setting>_d<d>_runs<a>-<b>.json   one cell: runs a..b of a (setting, dataset), trained together as
                            one ensemble: D_KL per run, config, losses, timings
    cells/<setting>_d<d>_runs<a>-<b>.pth    the cell's trained weights (tensors + config, ``weights_only`` loadable)
    figures/                true_p_d<d>.png, data_d<d>.png, p_<setting>_d<d>_runs<a>-<b>.png (the cell's best run)

``group_size`` splits the runs of a (setting, dataset) into several cells (ensembles). Run r's initial weights
and shuffling depend only on r and its samples come from its group's own stream, so the groups together are
R independent runs; results.json merges them.
    sweep_m/                with --sweep-m: sweep_m.json, sweep_m.png and the sweep's cells

A cell whose JSON exists with the same config and run count is loaded instead of retrained, so an
interrupted study continues where it stopped.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

import torch

from ltr.admin.config import apply_overrides, save_json, to_dict
from ltr.admin.io import atomic_write, atomic_write_text
from ltr.regression_1d import report
from ltr.regression_1d.ensemble import train_ensemble
from ltr.regression_1d.evaluate import evaluate_ensemble

CELL_VERSION = 1


@dataclass
class StudySpec:
    """What to run. ``overrides`` are ``key=value`` config overrides applied to every setting."""

    settings: Sequence[str]
    datasets: Sequence[int] = (1, 2)
    runs: int = 20
    epochs: int = 75
    seed: int = 0
    overrides: Sequence[str] = field(default_factory=tuple)
    jobs: int = 1
    device: str = "cpu"
    models_per_chunk: int | None = None
    progress: bool = True
    group_size: int | None = None

    def groups(self) -> list[tuple[int, int]]:
        """(first_run, num_runs) of every cell of a (setting, dataset)."""
        size = self.group_size or self.runs
        return [(a, min(size, self.runs - a)) for a in range(0, self.runs, size)]


def make_config(setting: str, dataset: int, spec: StudySpec, extra: Sequence[str] = ()):
    """The config of one cell: the setting's defaults, the spec's overrides, dataset/epochs/seed."""
    from ltr.train_settings.regression_1d import SETTINGS

    if setting not in SETTINGS:
        raise ValueError(f"unknown 1D regression setting {setting!r}; choose from {sorted(SETTINGS)}")
    config = apply_overrides(SETTINGS[setting](), [*spec.overrides, *extra])
    return config.replace(dataset=int(dataset), epochs=spec.epochs, seed=spec.seed)


def _cell_name(setting: str, dataset: int, first_run: int, num_runs: int) -> str:
    return f"{setting}_d{dataset}_runs{first_run:02d}-{first_run + num_runs - 1:02d}"


def run_cell(
    setting: str,
    dataset: int,
    spec: StudySpec,
    out: Path,
    extra: Sequence[str] = (),
    group: tuple[int, int] | None = None,
) -> dict:
    """Train (or load) runs ``group = (first_run, num_runs)`` of one (setting, dataset) as one ensemble."""
    first_run, num_runs = group or (0, spec.runs)
    config = make_config(setting, dataset, spec, extra)
    name = _cell_name(setting, dataset, first_run, num_runs)
    path = out / "cells" / f"{name}.json"
    if path.is_file():
        cell = json.loads(path.read_text())
        same = (cell.get("version"), cell.get("config"), cell.get("first_run"), cell.get("runs"))
        if same == (CELL_VERSION, to_dict(config), first_run, num_runs):
            return cell
    if spec.device == "cpu":
        torch.set_num_threads(1)
    training = train_ensemble(
        config,
        num_runs,
        first_run=first_run,
        device=spec.device,
        models_per_chunk=spec.models_per_chunk,
        epoch_callback=lambda epoch, losses: atomic_write_text(
            out / "progress" / f"{name}.txt",
            f"epoch {epoch + 1}/{config.epochs} mean loss {float(losses.mean()):.4f}\n",
        ),
        progress=spec.progress,
        desc=f"{setting} d{dataset} (runs {first_run}-{first_run + num_runs - 1})",
    )
    t0 = time.perf_counter()
    evaluation = evaluate_ensemble(training.ensemble, dataset, config.eval_grid)
    eval_seconds = time.perf_counter() - t0
    state = {k: v.detach().cpu() for k, v in training.ensemble.state_dict().items()}
    payload = {
        "version": CELL_VERSION,
        "state_dict": state,
        "config": to_dict(config),
        "first_run": first_run,
        "runs": num_runs,
    }

    def write(f):
        buf = io.BytesIO()
        torch.save(payload, buf)
        f.write(buf.getvalue())

    atomic_write(path.with_suffix(".pth"), write)
    report.save_density_figure(
        evaluation.log_density_best,
        out / "figures" / f"p_{name}.png",
        f"{setting}, dataset {dataset}, run {first_run + evaluation.best} (D_KL {evaluation.dkl[evaluation.best]:.3f})",
    )
    cell = {
        "version": CELL_VERSION,
        "setting": setting,
        "dataset": dataset,
        "first_run": first_run,
        "runs": num_runs,
        "config": to_dict(config),
        "dkl": evaluation.dkl,
        "dkl_best5": report.best_k_mean(evaluation.dkl),
        "best_run": first_run + evaluation.best,
        "sec_per_epoch": training.sec_per_epoch,
        "train_seconds": training.seconds,
        "train_cpu_seconds": training.extra["cpu_seconds"],
        "eval_seconds": eval_seconds,
        "final_loss": training.losses[-1].tolist(),
        "torch_threads": torch.get_num_threads(),
    }
    save_json(cell, path)
    return cell


def _cell_worker(args: tuple) -> dict:
    setting, dataset, spec, out, extra, group = args
    return run_cell(setting, dataset, spec, out, extra, group)


def summarise(cells: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """results.json content from cell dicts; the groups of a (setting, dataset) are merged in run order."""
    merged: dict[tuple[str, int], list[dict]] = {}
    for cell in cells:
        merged.setdefault((cell["setting"], cell["dataset"]), []).append(cell)
    results: dict[str, dict[str, dict]] = {}
    for (setting, dataset), group in merged.items():
        group.sort(key=lambda c: c.get("first_run", 0))
        dkl = [v for c in group for v in c["dkl"]]
        model_epochs = sum(c["runs"] * c["config"]["epochs"] for c in group)
        results.setdefault(setting, {})[str(dataset)] = {
            "dkl": dkl,
            "dkl_best5": report.best_k_mean(dkl),
            "sec_per_epoch": sum(c["train_seconds"] for c in group) / model_epochs,
        }
    return results


def run_cells(spec: StudySpec, out: Path, extra: Sequence[str] = (), on_cell=None) -> list[dict]:
    """Run every (setting, dataset) cell of ``spec``; ``on_cell(cells_so_far)`` after each one finishes."""
    from tqdm import tqdm

    todo = [(s, d, g) for g in spec.groups() for s in spec.settings for d in spec.datasets]
    cells: list[dict] = []
    bar = tqdm(total=len(todo), desc="cells", disable=not spec.progress)
    if spec.jobs <= 1:
        for s, d, g in todo:
            bar.set_postfix_str(f"{s} d{d} runs {g[0]}+{g[1]}")
            cells.append(run_cell(s, d, spec, out, extra, g))
            bar.update(1)
            if on_cell:
                on_cell(cells)
    else:
        worker_spec = StudySpec(**{**spec.__dict__, "progress": False})
        with ProcessPoolExecutor(max_workers=spec.jobs, mp_context=get_context("spawn")) as pool:
            futures = [
                pool.submit(_cell_worker, (s, d, worker_spec, out, tuple(extra), g)) for s, d, g in todo
            ]
            for fut in as_completed(futures):
                cells.append(fut.result())
                bar.update(1)
                if on_cell:
                    on_cell(cells)
    bar.close()
    order = {(s, d, g[0]): i for i, (s, d, g) in enumerate(todo)}
    return sorted(cells, key=lambda c: order[(c["setting"], c["dataset"], c["first_run"])])


def write_outputs(cells: Sequence[dict], out: Path, spec: StudySpec) -> tuple[dict, str]:
    """Write results.json and table.md; returns (results, table text)."""
    results = summarise(cells)
    save_json(results, out / "results.json")
    table = report.table_markdown(results, epochs=spec.epochs)
    atomic_write_text(out / "table.md", table)
    return results, table


def run_study(spec: StudySpec, out: Path) -> tuple[dict, str]:
    """The full study into ``out``: cells, results.json, table.md and figures."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for d in spec.datasets:
        report.save_dataset_figures(int(d), out / "figures")
    cells = run_cells(spec, out, on_cell=lambda cs: write_outputs(cs, out, spec))
    return write_outputs(cells, out, spec)


def run_sweep(spec: StudySpec, out: Path, sample_counts: Sequence[int]) -> dict[str, dict[str, float]]:
    """Figure 2: D_KL (mean of 5 best, averaged over datasets) versus M, into ``out/sweep_m``."""
    sweep_dir = Path(out) / "sweep_m"
    sweep: dict[str, dict[str, float]] = {s: {} for s in spec.settings}
    per_m: dict[str, dict] = {}
    default_m = {make_config(s, d, spec).num_samples for s in spec.settings for d in spec.datasets}
    for m in sample_counts:
        if default_m == {m}:  # the main study's cells (reused when they exist)
            cells = run_cells(spec, Path(out))
        else:
            cells = run_cells(spec, sweep_dir / f"M{m}", extra=(f"num_samples={m}",))
        results = summarise(cells)
        per_m[str(m)] = results
        for s, cell in results.items():
            avg = report.dataset_average(cell)
            sweep[s][str(m)] = (
                avg if avg is not None else float(sum(v["dkl_best5"] for v in cell.values()) / len(cell))
            )
        save_json(
            {"dkl_vs_m": sweep, "results": per_m, "runs": spec.runs, "epochs": spec.epochs},
            sweep_dir / "sweep_m.json",
        )
        report.save_sweep_figure(sweep, sweep_dir / "sweep_m.png")
    return sweep
