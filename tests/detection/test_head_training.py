"""The energy head and the tiny detector on the generic trainer: exact resume, divergence, LR schedule."""

import math
from dataclasses import replace

import pytest
import torch

from ltr.admin.checkpoint import load_checkpoint, save_checkpoint
from ltr.admin.config import apply_overrides
from ltr.detection.detector_train import warmup_cosine
from ltr.detection.pipeline import TrainingDiverged, build_head, build_head_trainer, build_setup, train_head
from ltr.train_settings.detection import SETTINGS

TINY = [
    "synthetic.num_train=3",
    "synthetic.num_val=1",
    "synthetic.num_test=1",
    "synthetic.image_size=64",
    "synthetic.min_box=12",
    "synthetic.max_box=30",
    "detector_iters=1",
    "hidden=32",
    "num_samples=8",
    "batch_images=2",
    "log_every=2",
    "lr_step=3",
]
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cfg = apply_overrides(SETTINGS["nce_plus_tiny"](), TINY)
    return cfg, build_setup(cfg, tmp_path_factory.mktemp("ws"), CPU, lambda _: None)


def _trainer(cfg, setup, iterations):
    torch.manual_seed(0)
    head = build_head(cfg, setup.detector.out_channels)
    return build_head_trainer(replace(cfg, iterations=iterations), setup, head, CPU, setting="detection/t")


def test_a_resumed_head_equals_an_uninterrupted_one(setup, tmp_path):
    cfg, s = setup
    straight = _trainer(cfg, s, 5)
    history = train_head(cfg, straight)
    assert [h["iteration"] for h in history] == [2, 4, 5]  # an epoch every log_every steps, the last shorter
    assert [h["lr/group0"] for h in history] == pytest.approx(
        [cfg.lr, cfg.lr, 0.1 * cfg.lr]
    )  # StepLR in steps
    first = _trainer(cfg, s, 2)
    train_head(cfg, first)
    path = save_checkpoint(tmp_path / "head.pth", first.checkpoint_state())
    resumed = _trainer(cfg, s, 5)
    resumed.load_checkpoint_state(load_checkpoint(path), path)
    assert [h["iteration"] for h in train_head(cfg, resumed)] == [2, 4, 5]
    a, b = straight.net.state_dict(), resumed.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not straight.net.training  # handed back in eval mode, ready for refinement


def test_a_non_finite_loss_is_a_diverged_training(setup):
    cfg, s = setup
    trainer = _trainer(cfg, s, 2)
    with torch.no_grad():
        next(trainer.net.parameters()).fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match=r"nce_plus: detection/t: epoch 1 step 1: loss is nan"):
        train_head(cfg, trainer)


def test_warmup_cosine():
    assert warmup_cosine(0, 500) == pytest.approx(1 / 50)
    assert warmup_cosine(49, 500) == pytest.approx(math.cos(math.pi * 49 / 500) / 2 + 0.5)
    assert warmup_cosine(250, 500) == pytest.approx(0.5)
    assert warmup_cosine(499, 500) == pytest.approx(0.5 * (1 + math.cos(math.pi * 499 / 500)))
