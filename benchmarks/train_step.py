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

On CUDA two more questions, each answered in the same process:

- ``--amp``: every size is timed again with the trainer's mixed precision (float16 autocast, gradients
  through a ``GradScaler``); the ratio float32 / AMP of the forward + backward + optimiser time is printed.
- ``--workers N [N ...]``: the loader as training runs it (:class:`ltr.data.loader.TrainingLoader` with N
  worker processes, batches moved to the device) for ``--loader-batches`` batches, alone and then feeding
  float32 steps. Against the step on batches already on the device, this shows whether the loader keeps up
  and what the workers cost the main process on a shared host.

    python benchmarks/train_step.py [--sizes tiny r50] [--batch-tiny 8] [--batch-r50 2] [--steps 4]
        [--device cpu|cuda] [--amp] [--workers 6 12] [--loader-batches 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator

import torch
from torch.optim import Optimizer

from ltr.actors import DiMPActor
from ltr.admin.config import to_dict
from ltr.data.config import DataConfig
from ltr.data.loader import TrainingLoader
from ltr.data.sampler import TrackingSampler
from ltr.dataset.registry import datasets_from_specs
from ltr.ebm import build_method
from ltr.models.tracking import DiMPNet, build_dimpnet, lr_groups
from ltr.train_settings.dimp import SETTINGS
from ltr.train_settings.dimp.base import DiMPTrainConfig
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


def batches_of(data: DataConfig, device: torch.device) -> Iterator[dict]:
    """The training loader's batches for ``data`` (with its ``num_workers``), moved to ``device``. The
    datasets, the sampler and the loader's iterator are built here, not in the first ``next``."""
    sampler = TrackingSampler.from_config(
        data, datasets_from_specs(data.datasets, {}), training=True, rank=0, world_size=1
    )
    loader = TrainingLoader(sampler, batch_size=data.batch_size, num_workers=data.num_workers, device=device)
    return (move_to_device(batch, device) for batch in loader)  # iter(loader) runs now


def training_parts(cfg: DiMPTrainConfig, device: torch.device) -> tuple[DiMPNet, DiMPActor, Optimizer]:
    """The network on ``device``, its actor with the setting's box loss (train mode) and the trainer's Adam."""
    net = build_dimpnet(cfg.net).to(device)
    method = build_method(cfg.data.box_method, **dict(cfg.data.box_method_kwargs))
    actor = DiMPActor(net, method, cfg.box_weight).train()
    return net, actor, build_adam(net, lr_groups(**to_dict(cfg.lr)))


def measure(
    cfg: DiMPTrainConfig,
    steps: int,
    warmup: int,
    repeats: int,
    device: torch.device,
    *,
    amp: bool = False,
) -> dict[str, float]:
    """Median seconds per step of each part (see the module docstring).

    ``steps`` batches are drawn (and timed) first; then every batch goes ``repeats`` times through the full
    step and through the classifier-only forward+backward, alternating, after ``warmup`` untimed steps.
    ``amp``: forward passes under float16 autocast and backward passes through a ``GradScaler``, as the
    trainer does with ``trainer.amp=true`` (CUDA only).
    """
    if amp and device.type != "cuda":
        raise ValueError("train_step: --amp needs --device cuda (the trainer ignores AMP on a CPU)")
    seed_everything(0)
    loader = batches_of(dataclasses.replace(cfg.data, num_workers=0), device)  # in this process
    parts: dict[str, list[float]] = {
        k: [] for k in ("data", "forward", "backward", "optimizer", "clf_fwd_bwd")
    }
    batches = []
    for _ in range(steps):
        t_data, batch = _timed(lambda: next(loader), device)
        parts["data"].append(t_data)
        batches.append(batch)
    net, full, optimizer = training_parts(cfg, device)
    clf_only = DiMPActor(net, None).train()

    scaler = torch.amp.GradScaler(device.type, enabled=amp)

    def autocast() -> torch.autocast:
        return torch.autocast(device_type=device.type, dtype=torch.float16, enabled=amp)

    def forward(b: dict) -> tuple[torch.Tensor, dict]:
        with autocast():
            return full(b)

    def clf_step(b: dict) -> None:
        with autocast():
            clf_loss, _ = clf_only(b)
        scaler.scale(clf_loss).backward()

    def optimizer_step() -> None:
        scaler.step(optimizer)
        scaler.update()

    schedule = [batches[i % steps] for i in range(warmup)] + batches * repeats
    shares: list[float] = []
    for i, batch in enumerate(schedule):
        t_fwd, (loss, _) = _timed(lambda b=batch: forward(b), device)
        optimizer.zero_grad(set_to_none=True)
        t_bwd, _ = _timed(scaler.scale(loss).backward, device)
        t_opt, _ = _timed(optimizer_step, device)
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


def measure_loader(
    cfg: DiMPTrainConfig, workers: int, num_batches: int, device: torch.device
) -> tuple[float, float]:
    """(seconds per batch of the loader alone, seconds per float32 step fed by it) with ``workers`` workers.

    Each half draws one untimed batch first (the workers' start), then times ``num_batches`` batches; the
    fed steps run the full actor, backward and an Adam step on every batch, as the trainer does. When the
    first batch arrives the other workers are well into theirs, so with few timed batches per worker the
    loader-alone figure leans optimistic (time at least two batches per worker).
    """
    seed_everything(0)
    data = dataclasses.replace(
        cfg.data, num_workers=workers, samples_per_epoch=(num_batches + 1) * cfg.data.batch_size
    )

    def timed(step: Callable[[dict], object]) -> float:
        source = batches_of(data, device)
        step(next(source))  # untimed: the workers start
        count = 0

        def run() -> None:
            nonlocal count
            for batch in source:
                step(batch)
                count += 1
                if count == num_batches:
                    break

        elapsed, _ = _timed(run, device)
        if count < num_batches:
            raise RuntimeError(f"train_step: the loader gave {count} batches, {num_batches} were asked for")
        return elapsed / count

    _, actor, optimizer = training_parts(cfg, device)

    def train(b: dict) -> None:
        loss, _ = actor(b)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return timed(lambda b: None), timed(train)


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
    p.add_argument("--amp", action="store_true", help="also time every size with mixed precision (CUDA)")
    p.add_argument(
        "--workers", type=int, nargs="*", default=[], help="also time the loader with these worker counts"
    )
    p.add_argument("--loader-batches", type=int, default=20)
    args = p.parse_args(argv)
    if args.amp and args.device != "cuda":
        p.error("--amp needs --device cuda (the trainer ignores AMP on a CPU)")
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
    compute_ms: dict[tuple[str, bool], float] = {}
    for size in args.sizes:
        batch = args.batch_tiny if size == "tiny" else args.batch_r50
        for amp in (False, True) if args.amp else (False,):
            t = measure(size_config(size, batch), args.steps, args.warmup, args.repeats, device, amp=amp)
            step = t["data"] + t["forward"] + t["backward"] + t["optimizer"]
            compute = t["forward"] + t["backward"]
            compute_ms[size, amp] = 1e3 * (compute + t["optimizer"])
            box_share = 1.0 - t["clf_fwd_bwd"] / compute
            cells = [f"{1e3 * t[k]:6.0f} ({t[k] / step:4.0%})" for k in ("data", "forward", "backward")]
            optim = f"{1e3 * t['optimizer']:5.0f} ({t['optimizer'] / step:3.0%})"
            paired = f"{t['box_share_median']:.0%} [{t['box_share_min']:.0%}, {t['box_share_max']:.0%}]"
            label = size + (" amp" if amp else "")
            print(
                f"{label:5} {batch:5d} {1e3 * step:9.0f} {' '.join(cells)} {optim} {box_share:15.0%} "
                f"{paired:>26}"
            )
    print(
        "shares: of the full step; box-loss share: of forward+backward (1 - classifier-only / full), from the "
        "medians, and the median [min, max] of the same ratio per back-to-back pair on one batch"
    )
    if args.amp:
        for size in args.sizes:
            f32, half = compute_ms[size, False], compute_ms[size, True]
            print(
                f"{size}: forward + backward + optimiser {f32:.0f} ms float32, {half:.0f} ms AMP "
                f"(ratio > 1 = AMP is faster: {f32 / half:.2f}x)"
            )
    for size in args.sizes if args.workers else ():
        batch = args.batch_tiny if size == "tiny" else args.batch_r50
        for workers in args.workers:
            alone, fed = measure_loader(size_config(size, batch), workers, args.loader_batches, device)
            print(
                f"{size}, loader with {workers} workers, {args.loader_batches} batches of {batch}: "
                f"{1e3 * alone:.0f} ms per batch alone, {1e3 * fed:.0f} ms per float32 step fed by it "
                f"(step on batches already on the device: {compute_ms[size, False]:.0f} ms; ratio "
                f"{1e3 * fed / compute_ms[size, False]:.2f}x)"
            )


if __name__ == "__main__":
    main()
