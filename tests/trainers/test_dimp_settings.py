"""DiMP train settings: paper values, variants differ only in the box loss, missing data stops at once,
and the CPU-sized setting trains end to end through the command line (with resume)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.admin.checkpoint import list_checkpoints, load_checkpoint, run_dir
from ltr.admin.config import from_dict, to_dict
from ltr.cli.train import main as train_main
from ltr.models.tracking import NetConfig, build_dimpnet, lr_groups
from ltr.train_settings import MODULES
from ltr.train_settings.dimp import SETTINGS

REPO = Path(__file__).resolve().parents[2]
DATASET_ENV = ("LASOT_DIR", "GOT10K_DIR", "TRACKINGNET_DIR", "COCO_DIR")
# a very small run of the tiny setting: few short low-resolution synthetic videos, 16 candidates
SMALL = [
    "data.samples_per_epoch=8",
    "data.batch_size=4",
    "data.val_samples_per_epoch=4",
    "data.num_workers=0",
    'dataset_options={"synthetic": {"num_sequences": 4, "num_frames": 30, "width": 160, "height": 120}}',
    'data.box_method_kwargs={"sigmas": [[0.05, 0.05, 0.05, 0.05], [0.5, 0.5, 0.5, 0.5]], "num_samples": 15, '
    '"beta": 0.1}',
]


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k != "box_method_kwargs":
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_dimp_is_a_registered_module_with_the_six_settings():
    assert MODULES["dimp"].__name__ == "ltr.train_settings.dimp"
    assert MODULES["dimp"].SETTINGS.names == (
        "nce_plus",
        "kld_is",
        "nce",
        "ml_is",
        "nce_plus_tiny",
        "nce_plus_tiny_long",
    )


def test_the_longer_tiny_recipe_differs_only_in_length_and_training_videos():
    tiny, long = _flat(to_dict(SETTINGS["nce_plus_tiny"]())), _flat(to_dict(SETTINGS["nce_plus_tiny_long"]()))
    changed = {k for k in tiny.keys() | long.keys() if tiny.get(k) != long.get(k)}
    assert changed == {
        "trainer.epochs",
        "trainer.lr_step",
        "dataset_options.synthetic:train.num_sequences",
    }
    assert (long["trainer.epochs"], long["trainer.lr_step"]) == (45, 32)
    assert long["dataset_options.synthetic:train.num_sequences"] == 3200
    assert tuple(tiny["dataset_options.synthetic.target_size"]) == (0.09, 0.45)


def test_nce_plus_has_the_paper_values():
    c = SETTINGS["nce_plus"]()
    assert (c.net.backbone, c.net.pretrained, c.net.frozen_layers) == (
        "resnet50",
        True,
        ("conv1", "layer1", "layer2"),
    )
    assert (c.data.crop_size, c.data.feature_size, c.data.search_area_factor) == (352, 22, 6.0)
    assert (c.data.batch_size, c.data.samples_per_epoch, c.data.flip_prob) == (20, 40000, 0.5)
    assert c.data.datasets == ("lasot:train", "got10k:vottrain", "trackingnet:train", "coco:train")
    assert c.data.dataset_weights == (1.0, 1.0, 1.0, 1.0)
    assert c.dataset_options == {"trackingnet": {"chunks": [0, 1, 2, 3]}, "coco": {"version": "2014"}}
    assert (c.data.val_datasets, c.data.val_samples_per_epoch, c.trainer.val_every) == (
        ("got10k:votval",),
        10000,
        5,
    )
    assert (c.trainer.epochs, c.trainer.lr_step, c.trainer.lr_gamma) == (50, 15, 0.2)
    assert c.box_weight == 0.01
    assert dict(lr_groups(**to_dict(c.lr))) == {
        "classifier.initializer": 5e-5,
        "classifier.optimizer": 5e-4,
        "classifier.feature_head": 5e-5,
        "box_head": 1e-3,
        "backbone": 2e-5,
    }
    kw = c.data.box_method_kwargs
    assert c.data.box_method == "nce_plus" and kw["beta"] == 0.1
    assert kw["num_samples"] + 1 == 128  # 127 noise samples + the positive: M = 128
    assert kw["sigmas"] == ((0.05,) * 4, (0.5,) * 4)


@pytest.mark.parametrize("variant", ["kld_is", "nce", "ml_is"])
def test_variants_differ_from_nce_plus_only_in_the_box_loss(variant):
    base, other = _flat(to_dict(SETTINGS["nce_plus"]())), _flat(to_dict(SETTINGS[variant]()))
    assert {k for k in base if base[k] != other[k]} == {"data.box_method", "data.box_method_kwargs"}
    assert other["data.box_method"] == variant
    kw = other["data.box_method_kwargs"]
    assert kw["num_samples"] + (variant == "nce") == 128
    if variant == "kld_is":
        assert kw["label_sigma"] == 0.05


def test_only_the_tiny_recipe_clips_its_gradients():
    """The from-scratch tiny recipe clips its heavy-tailed gradient norm (median ~18, spikes to ~400); the
    paper settings fine-tune as the reference does, unclipped."""
    assert SETTINGS["nce_plus_tiny"]().trainer.grad_clip == 40.0
    assert SETTINGS["nce_plus"]().trainer.grad_clip is None


def test_config_round_trips_through_plain_data_and_rebuilds_the_network():
    c = SETTINGS["nce_plus_tiny"]()
    data = json.loads(json.dumps(to_dict(c)))
    assert from_dict(NetConfig, data["net"]) == c.net
    net = build_dimpnet(from_dict(NetConfig, data["net"]))
    assert sum(p.numel() for p in net.parameters()) > 0


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("net.backbone_width=-1", "base_width must be positive, got -1"),
        ("net.backbone=resnet7", "unknown backbone arch 'resnet7'; choose one of ['resnet18', 'resnet50']"),
    ],
)
def test_bad_network_values_stop_with_one_line(override, says, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        train_main(
            ["dimp", "nce_plus_tiny", override, "--workspace", str(tmp_path / "ws"), "--device", "cpu"]
        )
    assert e.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message
    assert message == f"error: net: {says}"
    assert not (tmp_path / "ws").exists()  # stopped before anything was written


def test_paper_setting_without_datasets_stops_at_once_naming_every_variable(monkeypatch, tmp_path, capsys):
    for var in DATASET_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "no-paths.json"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))  # no pretrained weights either
    with pytest.raises(SystemExit) as e:
        train_main(["dimp", "nce_plus", "--workspace", str(tmp_path / "ws"), "--device", "cpu"])
    assert e.value.code == 2
    message = capsys.readouterr().err.strip()
    assert "\n" not in message
    assert message.startswith("error: dimp/nce_plus cannot start: dataset roots are not configured")
    for var in DATASET_ENV:
        assert var in message, var
    assert "resnet50-" in message and "are not at" in message
    assert "dimp nce_plus_tiny" in message and "embedded synthetic" in message
    assert not (tmp_path / "ws").exists()  # nothing was built or written


def test_tiny_setting_trains_through_the_cli_and_resumes(tmp_path):
    torch.set_num_threads(1)
    ws = tmp_path / "ws"
    common = ["--workspace", str(ws), "--device", "cpu"]
    train_main(["dimp", "nce_plus_tiny", *SMALL, "trainer.epochs=1", "trainer.progress=false", *common])
    folder = run_dir(ws, "dimp/nce_plus_tiny")
    assert [e for e, _ in list_checkpoints(folder)] == [1]
    train_main(
        ["dimp", "nce_plus_tiny", *SMALL, "trainer.epochs=2", "trainer.progress=false", "--resume", *common]
    )
    assert [e for e, _ in list_checkpoints(folder)] == [1, 2]
    ckpt = load_checkpoint(folder / "ep0002.pth.tar")
    assert ckpt["setting"] == "dimp/nce_plus_tiny" and ckpt["epoch"] == 2
    assert ckpt["config"]["data"]["box_method"] == "nce_plus" and ckpt["config"]["trainer"]["epochs"] == 2
    net = build_dimpnet(from_dict(NetConfig, ckpt["config"]["net"]))
    net.load_state_dict(ckpt["net"])  # the network is rebuilt from the stored config
    history = json.loads((folder / "stats.json").read_text())["history"]
    assert [(r["epoch"], r["phase"]) for r in history] == [(1, "train"), (1, "val"), (2, "train"), (2, "val")]
    for r in history:
        assert r["samples"] == (8 if r["phase"] == "train" else 4)
        assert all(torch.isfinite(torch.tensor(r[k])) for k in ("loss", "loss/box", "loss/clf"))
    assert history[0]["lr/box_head"] == 3e-3


@pytest.mark.slow
def test_tiny_setting_under_torchrun_with_two_processes(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "ltr/run_training.py",
        "dimp",
        "nce_plus_tiny",
        *SMALL,
        "data.val_samples_per_epoch=8",  # 4 per rank: one full validation batch each
        "trainer.epochs=1",
        "trainer.progress=false",
        "--workspace",
        str(tmp_path / "ws"),
        "--device",
        "cpu",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    ckpt = load_checkpoint(run_dir(tmp_path / "ws", "dimp/nce_plus_tiny") / "ep0001.pth.tar")
    assert ckpt["rng"]["world_size"] == 2
    history = json.loads((run_dir(tmp_path / "ws", "dimp/nce_plus_tiny") / "stats.json").read_text())[
        "history"
    ]
    assert history[0]["samples"] == 8  # 4 per rank (samples_per_epoch is split over the ranks), summed
    assert history[1]["phase"] == "val" and history[1]["samples"] == 8 and "loss" in history[1]


def test_dataset_options_by_name_and_by_split_spec():
    from ltr.dataset.registry import datasets_from_specs

    options = {
        "synthetic": {"num_sequences": 3, "num_frames": 20},
        "synthetic:train": {"num_sequences": 5},  # this split only, over the name's options
    }
    train, val = datasets_from_specs(["synthetic:train", "synthetic:val"], options)
    assert len(train.sequence_names()) == 5 and len(val.sequence_names()) == 3
    assert train.config.num_frames == val.config.num_frames == 20


def test_the_demo_recipe_trains_on_targets_up_to_45_percent_of_the_frame():
    from ltr.dataset.registry import datasets_from_specs

    cfg = SETTINGS["nce_plus_tiny"]()
    sets = datasets_from_specs([*cfg.data.datasets, *cfg.data.val_datasets], cfg.dataset_options)
    assert [d.config.target_size for d in sets] == [(0.09, 0.45)] * 2
    assert [len(d.sequence_names()) for d in sets] == [200, 20]  # the splits' own sizes
    default = datasets_from_specs(["synthetic:train"])[0]

    def mean_size(d) -> float:  # sqrt(w h) of the first frame's box, pixels, over 40 videos
        return float(np.mean([np.sqrt(np.prod(d.scene(n).boxes[0, 2:])) for n in d.sequence_names()[:40]]))

    assert mean_size(sets[0]) > 1.3 * mean_size(default)  # uniform means 0.27 against 0.165
