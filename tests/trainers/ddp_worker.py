"""One rank of the 2-process DDP test (run by torchrun): trains the toy problem and records, per step, the
sample indices this rank saw and its full weight vector, into ``<out>/rank<r>.pt``."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.utils.data import DistributedSampler

from ltr.admin import distributed
from ltr.trainers import Hook, TrainerConfig, build_trainer, finish, prepare
from tests.trainers.toy import SETTING, ToyActor, ToyDataset, ToyNet, make_loader


class WeightRecorder(Hook):
    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []

    def after_step(self, trainer) -> None:
        self.weights.append(torch.cat([p.detach().flatten() for p in trainer.net.parameters()]).clone())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--workspace", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    info = prepare("cpu", seed=0)
    first_draw = torch.rand(4)  # rank-offset seeding: differs between ranks
    net = ToyNet()
    actor = ToyActor(net)
    dataset = ToyDataset(64)
    sampler = DistributedSampler(dataset, num_replicas=info.world_size, rank=info.rank, shuffle=True, seed=0)
    recorder = WeightRecorder()
    trainer = build_trainer(
        actor=actor,
        net=net,
        lr_groups=[("body", 1e-2), ("head", 5e-3)],
        train_loader=make_loader(dataset, batch_size=4, sampler=sampler),
        cfg=TrainerConfig(epochs=args.epochs, lr_step=1, lr_gamma=0.5, progress=False),
        setting=SETTING,
        workspace=Path(args.workspace),
        config={"test": "ddp"},
        device="cpu",
        extra_hooks=[recorder],
    )
    trainer.verbose = False
    wrapped = type(actor.net).__name__  # restored after training; record what the trainer used
    trainer.train(resume=args.resume)
    torch.save(
        {
            "rank": distributed.rank(),
            "world_size": distributed.world_size(),
            "backend": info.backend,
            "seen": torch.tensor(actor.seen),
            "weights": torch.stack(recorder.weights),
            "first_draw": first_draw,
            "model_type": type(trainer.model).__name__,
            "actor_net_after": wrapped,
        },
        Path(args.out) / f"rank{info.rank}.pt",
    )
    finish()


if __name__ == "__main__":
    main()
