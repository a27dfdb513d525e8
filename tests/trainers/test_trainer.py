"""The generic trainer on a toy problem: learning, exact resume, LR groups and schedule, stats, hooks."""

from __future__ import annotations

import csv
import json
import math

import pytest
import torch
from torch import nn

from ltr.admin.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, run_dir
from ltr.trainers import Hook, Trainer, build_adam, resolve_param_groups
from ltr.trainers.trainer import grad_norm_stats
from tests.trainers.toy import SETTING, ToyActor, ToyDataset, ToyNet, build, make_loader

TIMING_KEYS = {"time_s", "data_time_s", "samples_per_s"}


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _without_timing(history):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in history]


def test_loss_falls_over_a_few_dozen_iterations():
    trainer, actor = build(None, epochs=6, lr_groups=[("", 3e-2)], lr_step=100, val=False)
    history = trainer.train()
    assert len(actor.seen) == 48  # 6 epochs x 8 steps
    losses = [r["loss"] for r in history]
    assert losses[-1] < 0.25 * losses[0], losses
    assert all(r["samples"] == 64 and r["steps"] == 8 for r in history)


def test_resume_is_bit_identical_to_an_uninterrupted_run(tmp_path):
    full, _ = build(tmp_path / "a", epochs=3)
    full.train()

    part, _ = build(tmp_path / "b", epochs=2)
    part.train()
    assert [e for e, _ in list_checkpoints(run_dir(tmp_path / "b", SETTING))] == [1, 2]
    # a new process would build a fresh, differently initialised network: resume must overwrite all of it
    resumed, _ = build(tmp_path / "b", epochs=3, seed=99)
    resumed.train(resume=True)

    assert resumed.epoch == full.epoch == 3
    assert resumed.global_step == full.global_step == 24
    for (name, a), (_, b) in zip(
        full.net.state_dict().items(), resumed.net.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    opt_a, opt_b = full.optimizer.state_dict(), resumed.optimizer.state_dict()
    assert opt_a["param_groups"] == opt_b["param_groups"]
    for pid, state in opt_a["state"].items():
        for key, value in state.items():
            assert torch.equal(value, opt_b["state"][pid][key]), (pid, key)
    assert full.scheduler.state_dict() == resumed.scheduler.state_dict()
    assert _without_timing(full.history) == _without_timing(resumed.history)

    # the checkpoint files of both runs agree as well
    ca = load_checkpoint(run_dir(tmp_path / "a", SETTING) / "ep0003.pth.tar")
    cb = load_checkpoint(run_dir(tmp_path / "b", SETTING) / "ep0003.pth.tar")
    assert ca["epoch"] == cb["epoch"] == 3
    for key, value in ca["net"].items():
        assert torch.equal(value, cb["net"][key]), key
    for key, value in ca["rng"]["ranks"][0].items():
        assert torch.equal(value, cb["rng"]["ranks"][0][key]), key


def test_resume_without_checkpoints_starts_at_epoch_one_and_fresh_run_refuses_to_overwrite(tmp_path):
    trainer, _ = build(tmp_path, epochs=1, val=False)
    trainer.train(resume=True)
    assert trainer.epoch == 1 and trainer.resumed_from is None
    again, _ = build(tmp_path, epochs=2, val=False)
    with pytest.raises(CheckpointError, match=r"already holds checkpoints up to epoch 1; pass --resume"):
        again.train()


def test_resume_refuses_a_checkpoint_of_another_setting(tmp_path):
    trainer, _ = build(tmp_path, epochs=1, val=False)
    trainer.train()
    other, _ = build(tmp_path, epochs=2, val=False)
    other.setting = "toy/other"
    with pytest.raises(CheckpointError, match=r"holds setting 'toy/regression', but this run is 'toy/other'"):
        other.train(resume=True)


def test_lr_schedule_per_group_after_n_epochs():
    trainer, _ = build(None, epochs=5, lr_groups=[("body", 1e-2), ("head", 4e-3)], lr_step=2, val=False)
    history = trainer.train()
    for record in history:
        factor = 0.5 ** ((record["epoch"] - 1) // 2)  # gamma 0.5 every 2 epochs, stepped after each epoch
        assert record["lr/body"] == pytest.approx(1e-2 * factor, rel=1e-12)
        assert record["lr/head"] == pytest.approx(4e-3 * factor, rel=1e-12)
    # after 5 scheduler steps the LRs are 0.5 ** 2
    lrs = {g["name"]: g["lr"] for g in trainer.optimizer.param_groups}
    assert lrs == pytest.approx({"body": 1e-2 * 0.25, "head": 4e-3 * 0.25})


def test_param_groups_longest_prefix_wins_frozen_excluded_and_errors():
    net = ToyNet()
    net.body[0].bias.requires_grad_(False)
    groups = resolve_param_groups(net, [("", 1e-4), ("head", 1e-3), (net.body, 2e-3)])
    by_name = {g.name: g for g in groups}
    assert by_name["head"].param_names == ("head.weight", "head.bias")
    assert by_name["body"].param_names == ("body.0.weight",)  # the frozen bias is left out
    assert by_name["body"].lr == 2e-3
    with pytest.raises(ValueError, match="names no submodule"):
        resolve_param_groups(net, [("backbone", 1e-3)])
    with pytest.raises(ValueError, match=r"1 trainable parameter\(s\) are in no LR group \(body.0.weight\)"):
        resolve_param_groups(net, [("head", 1e-3)])
    with pytest.raises(ValueError, match="given twice"):
        resolve_param_groups(net, [("head", 1e-3), ("head", 1e-4)])
    opt = build_adam(net, [("head", 1e-3)], default_lr=1e-5)
    assert [(g["name"], g["lr"], len(g["params"])) for g in opt.param_groups] == [
        ("head", 1e-3, 2),
        ("default", 1e-5, 1),
    ]


def test_stats_csv_and_json_match_the_history(tmp_path):
    trainer, _ = build(tmp_path, epochs=3)
    history = trainer.train()
    folder = run_dir(tmp_path, SETTING)
    with open(folder / "stats.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(int(r["epoch"]), r["phase"]) for r in rows] == [
        (1, "train"),
        (2, "train"),
        (2, "val"),
        (3, "train"),
        (3, "val"),
    ]
    header = list(rows[0])
    assert header[:2] == ["epoch", "phase"] and header[2:] == sorted(header[2:])
    for row, record in zip(rows, history, strict=True):
        assert float(row["loss"]) == record["loss"]  # repr() round-trips exactly
        assert (row["lr/body"] == "") == (record["phase"] == "val")
    data = json.loads((folder / "stats.json").read_text())
    assert data["meta"] == {"setting": SETTING, "world_size": 1, "epochs": 3}
    assert data["history"] == history
    assert json.loads((folder / "config.json").read_text()) == {"epochs": 3, "seed": 0}
    # the val loss is the mean over the 16 validation samples of the per-batch losses
    assert history[2]["samples"] == 16 and math.isfinite(history[2]["loss"])


def test_validation_runs_every_n_epochs_and_after_the_last():
    trainer, _ = build(None, epochs=5)  # val_every=2
    history = trainer.train()
    assert [r["epoch"] for r in history if r["phase"] == "val"] == [2, 4, 5]
    assert trainer.net.training  # back in train mode after validation


class _GradNorm(Hook):
    def __init__(self):
        self.norms = []

    def after_step(self, trainer):
        grads = [p.grad.flatten() for p in trainer.net.parameters() if p.grad is not None]
        self.norms.append(float(torch.cat(grads).norm()))


def test_gradient_clipping_bounds_the_gradient_norm():
    free, clipped = _GradNorm(), _GradNorm()
    build(None, epochs=1, val=False, extra_hooks=[free])[0].train()
    build(None, epochs=1, val=False, extra_hooks=[clipped], grad_clip=0.05)[0].train()
    assert min(free.norms) > 0.5  # the toy gradients are far above the clip norm
    assert max(clipped.norms) == pytest.approx(0.05, rel=1e-4)


def test_epoch_record_holds_the_gradient_norms_before_clipping():
    free, clipped = _GradNorm(), _GradNorm()
    history = build(None, epochs=2, val=False, extra_hooks=[free])[0].train()
    norms = torch.tensor(free.norms[:8], dtype=torch.float64)  # 64 samples / batch 8: 8 steps per epoch
    first = history[0]
    assert first["grad_norm"] == pytest.approx(float(torch.quantile(norms, 0.5)), rel=1e-5)
    assert first["grad_norm_p90"] == pytest.approx(float(torch.quantile(norms, 0.9)), rel=1e-5)
    assert first["grad_norm_max"] == pytest.approx(float(norms.max()), rel=1e-5)
    assert first["grad_nonfinite"] == 0.0 and "grad_clipped" not in first
    assert history[1]["grad_norm_max"] == pytest.approx(max(free.norms[8:]), rel=1e-5)

    # with clipping the record keeps the norms from before clipping (all far above 0.05: every step clipped)
    history = build(None, epochs=1, val=False, extra_hooks=[clipped], grad_clip=0.05)[0].train()
    assert history[0]["grad_norm_max"] > 0.5 and max(clipped.norms) == pytest.approx(0.05, rel=1e-4)
    assert history[0]["grad_clipped"] == 1.0


def test_gradient_norm_statistics_skip_non_finite_steps():
    norms = [torch.tensor(v) for v in (1.0, float("inf"), 3.0, 2.0, float("nan"))]
    stats = grad_norm_stats(norms, clip=2.5)
    assert stats == {
        "grad_nonfinite": 2.0,
        "grad_norm": 2.0,
        "grad_norm_p90": pytest.approx(2.8),
        "grad_norm_max": 3.0,
        "grad_clipped": pytest.approx(1 / 3),
    }
    assert grad_norm_stats([], clip=None) == {}


def test_non_finite_loss_stops_with_epoch_and_step():
    net = ToyNet()

    def actor(batch):
        loss = net(batch["x"]).mean() * float("nan")
        return loss, {}

    opt = build_adam(net, [("", 1e-3)])
    trainer = Trainer(
        actor=actor, net=net, optimizer=opt, train_loader=make_loader(ToyDataset(16)), epochs=1, device="cpu"
    )
    with pytest.raises(FloatingPointError, match=r"epoch 1 step 1: loss is nan"):
        trainer.train()


def test_actor_net_is_restored_and_train_mode_method_is_used():
    class ModeActor(ToyActor):
        modes: list[bool] = []

        def train(self, mode: bool) -> None:
            self.modes.append(mode)
            self.net.train(mode)
            self.net.body[2].eval()  # e.g. keep some layers frozen in eval mode

    net = ToyNet()
    actor = ModeActor(net)
    trainer = Trainer(
        actor=actor,
        net=net,
        optimizer=build_adam(net, [("", 1e-3)]),
        train_loader=make_loader(ToyDataset(16)),
        epochs=2,
        device="cpu",
        hooks=[],
    )
    trainer.train()
    assert actor.modes == [True, True]
    assert actor.net is net and not net.body[2].training


@pytest.mark.skipif(not torch.cuda.is_available(), reason="AMP runs on CUDA only")
def test_amp_on_cuda_trains_and_checkpoints_the_scaler(tmp_path):
    torch.manual_seed(0)
    net = ToyNet()
    actor = ToyActor(net)
    trainer = Trainer(
        actor=actor,
        net=net,
        optimizer=build_adam(net, [("", 3e-2)]),
        train_loader=make_loader(ToyDataset(64)),
        epochs=4,
        device="cuda",
        amp=True,
    )
    history = trainer.train()
    assert trainer.amp and history[-1]["loss"] < 0.5 * history[0]["loss"]
    assert "scaler" in trainer.checkpoint_state()


def test_device_resolution():
    from ltr.trainers import resolve_device

    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device must be auto, cpu or cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")


def test_amp_is_ignored_on_cpu():
    net = nn.Linear(4, 2)
    trainer = Trainer(
        actor=lambda b: (net(b).sum(), {}),
        net=net,
        optimizer=build_adam(net, [("", 1e-3)]),
        train_loader=[torch.ones(2, 4)],
        epochs=1,
        device="cpu",
        amp=True,
        verbose=False,
    )
    assert trainer.amp is False and not trainer.scaler.is_enabled()


def test_one_summary_line_per_epoch_on_stderr(capsys):
    trainer, _ = build(None, epochs=2)  # validation every 2 epochs
    trainer.verbose = True
    history = trainer.train()
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("epoch ")]
    assert len(lines) == 2
    assert lines[0].startswith(f"epoch 1/2: train loss {history[0]['loss']:.4f}, ")
    assert "lr 0.005/0.01" in lines[0] and "val loss" not in lines[0]
    assert lines[1].endswith(f"val loss {history[2]['loss']:.4f}")


def test_validation_loader_without_a_full_batch_is_reported_not_fatal(capsys):
    from ltr.trainers import ValidationHook

    hook = ValidationHook(make_loader(ToyDataset(4), batch_size=8), every=1)  # drop_last: no batch at all
    trainer, _ = build(None, epochs=1, val=False, extra_hooks=[hook])
    trainer.verbose = True
    history = trainer.train()
    assert history[1]["phase"] == "val" and history[1]["samples"] == 0 and "loss" not in history[1]
    assert "val: no batches" in capsys.readouterr().err
