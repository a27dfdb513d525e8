"""Iteration-based training on the generic trainer: StepLoader epochs and a per-step LR schedule."""

import pytest
import torch
from torch import nn

from ltr.trainers import LRScheduleHook, StepLoader, Trainer


def test_step_loader_cuts_the_steps_into_epochs_and_draws_lazily():
    drawn = []

    def draw() -> int:
        drawn.append(len(drawn))
        return drawn[-1]

    loader = StepLoader(draw, total_steps=7, steps_per_epoch=3)
    assert loader.num_epochs == 3
    lengths = []
    for epoch in (1, 2, 3):
        loader.set_epoch(epoch)
        lengths.append(len(loader))
        before = len(drawn)
        it = iter(loader)
        assert next(it) == before and len(drawn) == before + 1  # drawn one at a time, when asked for
        list(it)
    assert lengths == [3, 3, 1] and drawn == list(range(7))
    with pytest.raises(ValueError, match="outside 1..3"):
        loader.set_epoch(4)
    assert StepLoader(draw, total_steps=0, steps_per_epoch=3).num_epochs == 0  # a run of no steps
    with pytest.raises(ValueError, match="steps_per_epoch"):
        StepLoader(draw, total_steps=3, steps_per_epoch=0)


def test_trainer_runs_a_step_loader_with_a_per_step_schedule():
    torch.manual_seed(0)
    net = nn.Linear(2, 1)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(64, 2, generator=gen)
    y = x @ torch.tensor([[1.5], [-2.0]]) + 0.3

    def draw() -> tuple[torch.Tensor, torch.Tensor]:
        i = torch.randint(64, (8,), generator=gen)
        return x[i], y[i]

    def actor(batch):
        xb, yb = batch
        return ((net(xb) - yb) ** 2).mean(), {}

    loader = StepLoader(draw, total_steps=50, steps_per_epoch=20)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)  # counted in steps
    trainer = Trainer(
        actor=actor,
        net=net,
        optimizer=opt,
        scheduler=sched,
        train_loader=loader,
        epochs=loader.num_epochs,
        hooks=[LRScheduleHook(per_step=True)],
        device="cpu",
        verbose=False,
    )
    history = trainer.train()
    assert [r["steps"] for r in history] == [20, 20, 10] and trainer.global_step == 50
    assert [r["lr/group0"] for r in history] == pytest.approx([0.1, 0.1, 0.01])  # the LR at each epoch start
    assert opt.param_groups[0]["lr"] == pytest.approx(0.01) and sched.last_epoch == 50
    assert history[-1]["loss"] < 0.01 * history[0]["loss"]
