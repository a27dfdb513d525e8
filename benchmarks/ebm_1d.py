"""Seconds per epoch per model of the 1D study: the ensemble trainer versus the straightforward loop.

For each method, in the same process and with one intra-op thread:

- baseline: ``ltr.regression_1d.single`` -- one ``Toy1DNet`` (nn.Module) on the generic trainer, a shuffled
  DataLoader with batches of 32, the ltr.ebm loss per batch, Adam; the way the reference trains its 20 models
  one by one.
- ensemble: ``ltr.regression_1d.ensemble.train_ensemble`` -- R models with stacked weights trained at
  once by batched matrix products.

Both sides train on the full 2000-point dataset; the numbers are process CPU seconds (robust on a shared
machine) and wall seconds, per epoch and per model, and the ratio baseline / ensemble.

    python benchmarks/ebm_1d.py [--methods ml_is,nce] [--epochs 2] [--runs 8]
"""

from __future__ import annotations

import argparse
import time

import torch

from ltr.admin.registry import UnknownName
from ltr.regression_1d.ensemble import train_ensemble
from ltr.regression_1d.single import build_trainer
from ltr.train_settings.regression_1d import SETTINGS

DEFAULT_METHODS = ("ml_is", "kld_is", "nce", "nce_plus", "dsm", "sm", "ml_mcmc_1", "ml_mcmc_16")
TARGET = ("ml_is", "kld_is", "nce", "nce_plus", "dsm")


def _timed(fn) -> tuple[float, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def measure(setting: str, *, epochs: int, runs: int, dataset: int = 1) -> dict[str, float]:
    """CPU and wall seconds per epoch per model of both trainers for one setting."""
    config = SETTINGS[setting]().replace(dataset=dataset, epochs=epochs)
    build_trainer(config.replace(epochs=1), verbose=False).train()  # warm-up (allocator)
    train_ensemble(config.replace(epochs=1), 2)
    base_cpu, base_wall = _timed(lambda: build_trainer(config, verbose=False).train())
    ens_cpu, ens_wall = _timed(lambda: train_ensemble(config, runs))
    n_base, n_ens = epochs, epochs * runs
    return {
        "baseline_cpu": base_cpu / n_base,
        "baseline_wall": base_wall / n_base,
        "ensemble_cpu": ens_cpu / n_ens,
        "ensemble_wall": ens_wall / n_ens,
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", default=",".join(DEFAULT_METHODS), help="comma-separated settings")
    p.add_argument("--epochs", type=int, default=2, help="epochs per measurement (default 2)")
    p.add_argument("--runs", type=int, default=8, help="ensemble size R (default 8)")
    p.add_argument("--dataset", type=int, default=1, choices=[1, 2])
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    try:
        for m in methods:
            SETTINGS[m]  # an unknown one: the registry's error, listing the settings
    except UnknownName as err:
        raise SystemExit(f"error: {err}") from None
    print(
        f"seconds per epoch per model, dataset {args.dataset}, {args.epochs} epochs, R={args.runs}, 1 thread"
    )
    header = (
        f"{'method':12s} {'baseline cpu':>12s} {'ensemble cpu':>12s} {'ratio cpu':>9s}   "
        f"{'baseline wall':>13s} {'ensemble wall':>13s} {'ratio wall':>10s}"
    )
    print(header)
    for m in methods:
        r = measure(m, epochs=args.epochs, runs=args.runs, dataset=args.dataset)
        ratio_cpu = r["baseline_cpu"] / r["ensemble_cpu"]
        ratio_wall = r["baseline_wall"] / r["ensemble_wall"]
        flag = "  (target >= 3x)" if m in TARGET else ""
        print(
            f"{m:12s} {r['baseline_cpu']:12.3f} {r['ensemble_cpu']:12.3f} {ratio_cpu:8.2f}x   "
            f"{r['baseline_wall']:13.3f} {r['ensemble_wall']:13.3f} {ratio_wall:9.2f}x{flag}",
            flush=True,
        )


if __name__ == "__main__":
    main()
