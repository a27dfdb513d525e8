"""Where the time of a DiMP training step goes: data, forward, backward, optimiser, and the box loss share.

For each network size (``tiny`` = the ``dimp nce_plus_tiny`` setting, ``r50`` = the paper's ResNet-50 setting
without pretrained weights, both on the embedded synthetic videos) it times, per step, on CPU by default:

- data: producing one batch (sampler + processing + collation, in this process, no workers);
- forward / backward / optimiser step of the full actor (classifier + NCE+ box loss);
- forward + backward of the classifier alone (the same network and batch, box loss switched off), so that
  box-loss share = 1 - (classifier-only fwd+bwd) / (full fwd+bwd).

Medians over ``--steps`` batches (compute: ``--repeats`` passes over them after ``--warmup`` steps), printed
with each part's share of the full step (data + forward + backward + optimiser). One thread by default: on a
shared, loaded machine more threads than free cores make every step several times slower. Timings vary
between runs on a shared machine: compare the ratios printed by one run.

    python benchmarks/train_step.py [--sizes tiny r50] [--batch-tiny 8] [--batch-r50 2] [--steps 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable

import torch

from ltr.actors import DiMPActor
from ltr.admin.config import to_dict
from ltr.data.loader import TrainingLoader
from ltr.data.sampler import TrackingSampler
from ltr.ebm import build_method
from ltr.models.tracking import build_dimpnet, lr_groups
from ltr.train_settings.dimp import SETTINGS
from ltr.train_settings.dimp.base import DiMPTrainConfig
from ltr.train_settings.dimp.train import build_datasets
from ltr.trainers import build_adam, move_to_device, seed_everything


def size_config(size: str, batch: int) -> DiMPTrainConfig:
    """The benchmark's config for ``size`` (tiny | r50) with batch size ``batch``, on synthetic data."""
    if size == "tiny":
        cfg = SETTINGS["nce_plus_tiny"]()
    elif size == "r50":
        cfg = SETTINGS["nce_plus"]()
        cfg = dataclasses.replace(cfg, net=dataclasses.replace(cfg.net, pretrained=False), dataset_options={})
    else:
        raise ValueError(f"unknown size {size!r}")
    data = dataclasses.replace(
        cfg.data,
        datasets=("synthetic:train",),
        dataset_weights=(),
        val_datasets=(),
        batch_size=batch,
        num_workers=0,
    )
    return dataclasses.replace(cfg, data=data)


def _timed(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, out


def measure(
    cfg: DiMPTrainConfig, steps: int, warmup: int, repeats: int, device: torch.device
) -> dict[str, float]:
    """Median seconds per step of each part (see the module docstring).

    ``steps`` batches are drawn (and timed) first; then every batch goes ``repeats`` times through the full
    step and through the classifier-only forward+backward, alternating, after ``warmup`` untimed steps.
    """
    seed_everything(0)
    data = cfg.data
    sampler = TrackingSampler.from_config(
        data, build_datasets(data.datasets, {}), training=True, rank=0, world_size=1
    )
    loader = iter(TrainingLoader(sampler, batch_size=data.batch_size, num_workers=0, device=device))
    parts: dict[str, list[float]] = {
        k: [] for k in ("data", "forward", "backward", "optimizer", "clf_fwd_bwd")
    }
    batches = []
    for _ in range(steps):
        t_data, batch = _timed(lambda: move_to_device(next(loader), device), device)
        parts["data"].append(t_data)
        batches.append(batch)
    net = build_dimpnet(cfg.net).to(device)
    full = DiMPActor(
        net, build_method(data.box_method, **dict(data.box_method_kwargs)), cfg.box_weight
    ).train()
    clf_only = DiMPActor(net, None).train()
    optimizer = build_adam(net, lr_groups(**to_dict(cfg.lr)))

    def clf_step(b: dict) -> None:
        clf_loss, _ = clf_only(b)
        clf_loss.backward()

    schedule = [batches[i % steps] for i in range(warmup)] + batches * repeats
    shares: list[float] = []
    for i, batch in enumerate(schedule):
        t_fwd, (loss, _) = _timed(lambda b=batch: full(b), device)
        optimizer.zero_grad(set_to_none=True)
        t_bwd, _ = _timed(loss.backward, device)
        t_opt, _ = _timed(optimizer.step, device)
        optimizer.zero_grad(set_to_none=True)
        t_clf, _ = _timed(lambda b=batch: clf_step(b), device)
        optimizer.zero_grad(set_to_none=True)
        if i >= warmup:
            for key, value in zip(
                ("forward", "backward", "optimizer", "clf_fwd_bwd"), (t_fwd, t_bwd, t_opt, t_clf)
            ):
                parts[key].append(value)
            # paired on the same batch, back to back: robust to the machine's load drifting between pairs
            shares.append(1.0 - t_clf / (t_fwd + t_bwd))
    out = {k: statistics.median(v) for k, v in parts.items()}
    out["box_share_median"] = statistics.median(shares)
    out["box_share_min"], out["box_share_max"] = min(shares), max(shares)
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", nargs="+", default=["tiny", "r50"], choices=["tiny", "r50"])
    p.add_argument("--batch-tiny", type=int, default=8)
    p.add_argument("--batch-r50", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2, help="passes of the compute timing over the batches")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(
        f"device {device}, {torch.get_num_threads()} thread(s), {args.steps} batches, "
        f"{args.repeats} timed passes after {args.warmup} warm-up steps"
    )
    header = (
        f"{'size':5} {'batch':>5} {'step ms':>9} {'data':>12} {'forward':>12} {'backward':>12} {'optim':>11}"
    )
    print(header + f" {'box-loss share':>15} {'paired: median [min, max]':>26}")
    for size in args.sizes:
        batch = args.batch_tiny if size == "tiny" else args.batch_r50
        t = measure(size_config(size, batch), args.steps, args.warmup, args.repeats, device)
        step = t["data"] + t["forward"] + t["backward"] + t["optimizer"]
        compute = t["forward"] + t["backward"]
        box_share = 1.0 - t["clf_fwd_bwd"] / compute
        cells = [f"{1e3 * t[k]:6.0f} ({t[k] / step:4.0%})" for k in ("data", "forward", "backward")]
        optim = f"{1e3 * t['optimizer']:5.0f} ({t['optimizer'] / step:3.0%})"
        paired = f"{t['box_share_median']:.0%} [{t['box_share_min']:.0%}, {t['box_share_max']:.0%}]"
        print(
            f"{size:5} {batch:5d} {1e3 * step:9.0f} {' '.join(cells)} {optim} {box_share:15.0%} {paired:>26}"
        )
    print(
        "shares: of the full step; box-loss share: of forward+backward (1 - classifier-only / full), from the "
        "medians, and the median [min, max] of the same ratio per back-to-back pair on one batch"
    )


if __name__ == "__main__":
    main()
