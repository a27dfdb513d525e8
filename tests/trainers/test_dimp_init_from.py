"""DiMP training from a checkpoint's weights (``init_from``) with only some parts trained (``train_parts``):
the config check, the frozen parts (no gradient, BatchNorm in eval mode, weights bit-identical after
training), the box loss falling when only the box head retrains, resume, and the tracker's rebuild."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from ltr.admin.checkpoint import CheckpointError, load_checkpoint, run_dir, save_checkpoint
from ltr.admin.config import ConfigError, to_dict
from ltr.cli.train import main as train_main
from ltr.ebm import build_method
from ltr.models.tracking import build_dimpnet, tiny_net_config
from ltr.train_settings.dimp import SETTINGS
from ltr.train_settings.dimp.initial import (
    PartlyFrozenActor,
    apply_initial_weights,
    check_train_parts,
    frozen_parts,
    load_initial_weights,
    net_config_differences,
)
from ltr.trainers.freeze import eval_batchnorm, freeze_parts

TINY = "dimp/nce_plus_tiny"
BOX_KWARGS = (
    'data.box_method_kwargs={"sigmas": [[0.05, 0.05, 0.05, 0.05], [0.5, 0.5, 0.5, 0.5]], "num_samples": 15, '
    '"beta": 0.1}'
)


def _small(num_sequences: int, samples: int) -> list[str]:
    """A short CPU run of the tiny setting: few small synthetic videos, 16 candidates, no validation."""
    return [
        f"data.samples_per_epoch={samples}",
        "data.batch_size=4",
        "data.val_samples_per_epoch=0",
        "data.num_workers=0",
        "dataset_options="
        + json.dumps(
            {"synthetic": {"num_sequences": num_sequences, "num_frames": 30, "width": 160, "height": 120}}
        ),
        BOX_KWARGS,
        "trainer.progress=false",
        "--device",
        "cpu",
    ]


def _batchnorms(net: torch.nn.Module) -> dict[str, bool]:
    return {
        n: m.training for n, m in net.named_modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)
    }


# ------------------------------------------------------------------------------------------------ units
def test_train_parts_name_lr_group_prefixes_and_classifier_names_its_three():
    assert check_train_parts(("box_head",)) == ("box_head",)
    assert check_train_parts(("box_head", "classifier")) == (
        "classifier.initializer",
        "classifier.optimizer",
        "classifier.feature_head",
        "box_head",
    )
    with pytest.raises(ConfigError, match=r"unknown part\(s\) \['head'\]"):
        check_train_parts(("head",))
    with pytest.raises(ConfigError, match="train_parts is empty"):
        check_train_parts(())
    config = dataclasses.replace(SETTINGS["nce_plus"](), train_parts=("box_head", "classifier.optimizer"))
    assert frozen_parts(config) == ("classifier.initializer", "classifier.feature_head", "backbone")
    assert frozen_parts(SETTINGS["nce_plus"]()) == ()  # by default every part trains


def test_frozen_parts_get_no_gradient_and_keep_batchnorm_in_eval_mode():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config())
    frozen = ("backbone", "classifier.feature_head")
    names = freeze_parts(net, frozen)
    assert names and all(n.startswith(frozen) for n in names)
    for name, p in net.named_parameters():
        assert p.requires_grad == (not name.startswith(frozen)), name
    actor = PartlyFrozenActor(net, build_method("nce_plus", sigmas=((0.05,) * 4, (0.5,) * 4)), frozen=frozen)
    for mode in (True, False, True):
        actor.train(mode)
        modes = _batchnorms(net)
        assert any(n.startswith("box_head") for n in modes)
        for name, training in modes.items():
            assert training == (mode and not name.startswith(frozen)), (mode, name)
    with pytest.raises(ValueError, match=r"\['box'\] name no submodule"):
        eval_batchnorm(net, ("box",))


def test_network_configs_differ_only_in_what_they_compute():
    tiny = tiny_net_config()
    other = dataclasses.replace(
        tiny,
        pretrained=True,
        frozen_layers=("conv1",),
        optim_init_step=1.0,
        optim_init_reg=0.05,
        label_init_sigma=0.9,
        mask_init_factor=2.0,
        bin_displacement=tiny.bin_displacement * (1 + 1e-9),
    )
    assert net_config_differences(tiny, other) == []  # how a net is initialised / trained; float rounding
    assert net_config_differences(
        tiny, dataclasses.replace(tiny, clf_feature_dim=16, optim_min_reg=0.05)
    ) == [
        "net.clf_feature_dim (checkpoint 16, setting 32)",
        "net.optim_min_reg (checkpoint 0.05, setting 0.001)",
    ]


def _checkpoint(path: Path, net_config, state) -> Path:
    return save_checkpoint(
        path,
        {
            "format": "ebmtrack-checkpoint",
            "version": 1,
            "setting": "imported/test",
            "epoch": 0,
            "config": {"net": to_dict(net_config)},
            "net": state,
        },
    )


def test_initial_weights_are_checked_against_the_setting_network(tmp_path):
    torch.manual_seed(0)
    tiny = tiny_net_config()
    net = build_dimpnet(tiny)
    path = _checkpoint(tmp_path / "init.pth.tar", tiny, net.state_dict())
    state = load_initial_weights(path, dataclasses.replace(tiny, frozen_layers=("conv1", "layer1")))
    fresh = build_dimpnet(tiny)
    apply_initial_weights(fresh, state, path)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(), net.state_dict().values()))

    with pytest.raises(CheckpointError) as err:
        load_initial_weights(path, dataclasses.replace(tiny, num_optim_iter=3))
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: its network differs from the setting's in")
    assert "net.num_optim_iter (checkpoint 5, setting 3)" in message

    bad = dict(net.state_dict())
    bad["box_head.extra"] = torch.zeros(1)
    del bad["classifier.feature_head.conv.weight"]
    bad["box_head.predictor.weight"] = torch.zeros(3, 3)
    with pytest.raises(CheckpointError) as err:
        apply_initial_weights(build_dimpnet(tiny), bad, path)
    message = str(err.value)
    assert "1 missing tensor(s), first 'classifier.feature_head.conv.weight'" in message
    assert "1 unexpected tensor(s), first 'box_head.extra'" in message
    assert "1 mis-shaped tensor(s), first 'box_head.predictor.weight' (checkpoint (3, 3)" in message

    _checkpoint(tmp_path / "bare.pth.tar", tiny, net.state_dict())
    data = torch.load(tmp_path / "bare.pth.tar", weights_only=True)
    data["config"] = {"data": {}}
    torch.save(data, tmp_path / "bare.pth.tar")
    with pytest.raises(CheckpointError, match="its config has no 'net' section"):
        load_initial_weights(tmp_path / "bare.pth.tar", tiny)


# ------------------------------------------------------------------------------------------ training runs
@pytest.fixture(scope="module")
def initial(tmp_path_factory) -> Path:
    """A briefly trained tiny network (one epoch of 8 samples): the initial checkpoint of the runs below."""
    torch.set_num_threads(1)
    ws = tmp_path_factory.mktemp("initial")
    train_main(["dimp", "nce_plus_tiny", *_small(4, 8), "trainer.epochs=1", "--workspace", str(ws)])
    return run_dir(ws, TINY) / "ep0001.pth.tar"


def test_a_mismatching_network_is_refused_before_anything_is_built(initial, tmp_path, capsys):
    ws = tmp_path / "ws"
    with pytest.raises(SystemExit) as e:
        train_main(
            ["dimp", "nce_plus_tiny", *_small(1, 8), f"init_from={initial}", "net.clf_feature_dim=16"]
            + ["--workspace", str(ws)]
        )
    assert e.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message
    assert message.startswith(f"error: {initial}: its network differs from the setting's in")
    assert "net.clf_feature_dim (checkpoint 32, setting 16)" in message
    assert not ws.exists()


def test_box_head_retrains_from_initial_weights_with_the_rest_bit_identical(initial, tmp_path):
    """Only the box head trains (NCE+, LR 1e-2) on one synthetic video: every other tensor, BatchNorm
    statistics included, stays bit-identical; the box loss falls; resume reads only the run's own
    checkpoints (the initial file is gone by then), and the tracker rebuilds the result from its config."""
    from pytracking.tracker.dimp.network import load_network

    torch.set_num_threads(1)
    init = shutil.copy(initial, tmp_path / "init.pth.tar")
    ws = tmp_path / "ws"
    args = ["dimp", "nce_plus_tiny", *_small(1, 16), f"init_from={init}", "train_parts=box_head"]
    args += ["lr.box_head=1e-2", "--workspace", str(ws)]
    train_main([*args, "trainer.epochs=6"])
    Path(init).unlink()
    train_main([*args, "trainer.epochs=7", "--resume"])

    folder = run_dir(ws, TINY)
    start = load_checkpoint(initial)["net"]
    final = load_checkpoint(folder / "ep0007.pth.tar")
    assert final["config"]["init_from"] == str(init) and final["config"]["train_parts"] == ["box_head"]
    frozen = [k for k in start if not k.startswith("box_head.")]
    assert len(frozen) > 50 and all(torch.equal(final["net"][k], start[k]) for k in frozen)
    net = build_dimpnet(SETTINGS["nce_plus_tiny"]().net)
    box_params = [n for n, _ in net.box_head.named_parameters(prefix="box_head")]
    assert final["num_trainable"] == sum(p.numel() for p in net.box_head.parameters())
    assert all(not torch.equal(final["net"][k], start[k]) for k in box_params)

    history = json.loads((folder / "stats.json").read_text())["history"]
    assert [r["epoch"] for r in history] == list(range(1, 8))
    assert all(set(k for k in r if k.startswith("lr/")) == {"lr/box_head"} for r in history)
    box = [r["loss/box"] for r in history]
    # seeds 0-4 of this run: the last two epochs average 0.64-0.75 of the first
    assert (box[-1] + box[-2]) / 2 < 0.85 * box[0], box

    loaded = load_network(folder / "ep0007.pth.tar")  # init_from is gone: the tracker never reads it
    assert torch.equal(loaded.net.box_head.predictor.weight, final["net"]["box_head.predictor.weight"])
