"""A toy regression problem for trainer tests: linear targets with noise drawn at load time, a small MLP with
dropout (so the RNG state matters), and an actor. Also runnable as a script for subprocess tests::

    python -m tests.trainers.toy --workspace W --epochs 5 [--resume] [--sleep 0.01] [--buffer-mb 8]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from ltr.trainers import Hook, Trainer, TrainerConfig, build_trainer, seed_everything

SETTING = "toy/regression"


class ToyDataset(Dataset):
    """``n`` samples: x (4,), y = W x + 0.5 (2,) plus N(0, 0.05^2) noise from the global RNG per access."""

    def __init__(self, n: int = 64, seed: int = 123) -> None:
        self.x = torch.randn(n, 4, generator=torch.Generator().manual_seed(seed))
        w = torch.randn(2, 4, generator=torch.Generator().manual_seed(999))  # the same map for every split
        self.y = self.x @ w.T + 0.5

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"x": self.x[i], "y": self.y[i] + 0.05 * torch.randn(2), "index": torch.tensor(i)}


class ToyNet(nn.Module):
    def __init__(self, buffer_mb: float = 0.0) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(32, 2)
        # a large buffer makes checkpoint writes slow, so that a kill can land in the middle of one
        self.register_buffer("ballast", torch.zeros(int(buffer_mb * 2**20 / 4)))

    def forward(self, x: Tensor) -> Tensor:
        """x: (B, 4) -> (B, 2)."""
        return self.head(self.body(x))


class ToyActor:
    """MSE loss; records the sample indices it saw; optional sleep per step (for kill tests)."""

    def __init__(self, net: nn.Module, sleep_s: float = 0.0) -> None:
        self.net = net
        self.sleep_s = sleep_s
        self.seen: list[list[int]] = []

    def __call__(self, batch: dict[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        pred = self.net(batch["x"])
        loss = ((pred - batch["y"]) ** 2).mean()
        self.seen.append(batch["index"].tolist())
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return loss, {"mae": (pred - batch["y"]).abs().mean().detach()}


def make_loader(dataset: Dataset, batch_size: int = 8, sampler: object = None) -> DataLoader:
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=sampler is None, sampler=sampler, drop_last=True
    )


def build(
    workspace: Path | None,
    *,
    epochs: int,
    seed: int = 0,
    sleep_s: float = 0.0,
    buffer_mb: float = 0.0,
    lr_groups: Sequence[tuple[str, float]] = (("body", 1e-2), ("head", 5e-3)),
    lr_step: int = 2,
    val: bool = True,
    extra_hooks: Sequence[Hook] = (),
    checkpoint_every: int = 1,
    grad_clip: float | None = None,
) -> tuple[Trainer, ToyActor]:
    """A full toy run: seeded, Adam with two LR groups, StepLR, standard hooks, no progress bar."""
    seed_everything(seed)
    net = ToyNet(buffer_mb)
    actor = ToyActor(net, sleep_s)
    cfg = TrainerConfig(
        epochs=epochs,
        lr_step=lr_step,
        lr_gamma=0.5,
        seed=seed,
        val_every=2,
        progress=False,
        checkpoint_every=checkpoint_every,
        grad_clip=grad_clip,
    )
    trainer = build_trainer(
        actor=actor,
        net=net,
        lr_groups=lr_groups,
        train_loader=make_loader(ToyDataset(64)),
        val_loader=make_loader(ToyDataset(16, seed=7)) if val else None,
        cfg=cfg,
        setting=SETTING,
        workspace=workspace,
        config={"epochs": epochs, "seed": seed},
        device="cpu",
        extra_hooks=extra_hooks,
    )
    trainer.verbose = False
    return trainer, actor


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workspace", required=True)
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--sleep", type=float, default=0.0)
    p.add_argument("--buffer-mb", type=float, default=0.0)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    trainer, _ = build(Path(args.workspace), epochs=args.epochs, sleep_s=args.sleep, buffer_mb=args.buffer_mb)
    trainer.train(resume=args.resume)


if __name__ == "__main__":
    main()
