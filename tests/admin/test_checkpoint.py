"""Checkpoint format: round trip, safe loading only, clear refusals, the inspection CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.admin.checkpoint import (
    FORMAT,
    VERSION,
    CheckpointError,
    checkpoint_path,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    remove_stale_temp_files,
    run_dir,
    save_checkpoint,
)
from ltr.admin.checkpoint import (
    main as checkpoint_main,
)

REPO = Path(__file__).resolve().parents[2]


class Gadget:
    """A custom class: pickling an instance of it must make a file unloadable."""

    def __init__(self) -> None:
        self.value = 3


def _checkpoint(epoch: int = 7) -> dict:
    net = torch.nn.Linear(3, 2)
    return {
        "format": FORMAT,
        "version": VERSION,
        "setting": "dimp/nce_plus",
        "epoch": epoch,
        "config": {"lr": 1e-3, "sizes": [1, 2], "nested": {"name": "x", "none": None}},
        "net": net.state_dict(),
        "optimizer": torch.optim.Adam(net.parameters()).state_dict(),
        "stats": {"history": [{"epoch": 1, "phase": "train", "loss": 0.5}]},
        "rng": {"world_size": 1, "ranks": [{"torch": torch.get_rng_state()}]},
        "num_parameters": 8,
    }


def test_round_trip_keeps_tensors_and_plain_data(tmp_path):
    ckpt = _checkpoint()
    path = save_checkpoint(checkpoint_path(tmp_path, 7), ckpt)
    assert path.name == "ep0007.pth.tar"
    loaded = load_checkpoint(path)
    assert loaded["config"] == ckpt["config"] and loaded["stats"] == ckpt["stats"]
    for key, value in ckpt["net"].items():
        assert torch.equal(loaded["net"][key], value)
    assert torch.equal(loaded["rng"]["ranks"][0]["torch"], ckpt["rng"]["ranks"][0]["torch"])
    assert not list(tmp_path.glob(".*.tmp"))  # the temp file was renamed


def test_pickled_custom_object_is_refused_with_the_file_and_reason(tmp_path):
    ckpt = _checkpoint()
    ckpt["config"] = Gadget()
    path = tmp_path / "evil.pth.tar"
    torch.save(ckpt, path)  # what an unsafe writer would produce
    with pytest.raises(
        CheckpointError, match=r"evil\.pth\.tar: refused: the file holds pickled Python objects"
    ) as e:
        load_checkpoint(path)
    assert "Gadget" in str(e.value)


def test_numpy_arrays_are_refused_too(tmp_path):
    path = tmp_path / "np.pth.tar"
    torch.save({**_checkpoint(), "extra": np.zeros(3)}, path)
    with pytest.raises(CheckpointError, match="refused"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"epoch,loss\n1,0.5\n", "not a readable PyTorch checkpoint file"),
        (b"", "not a readable PyTorch checkpoint file"),
        (b"PK\x03\x04garbage", "not a readable PyTorch checkpoint file"),
        (b'{"history": []}\n', r"not a PyTorch checkpoint file \(no pickle stream"),
    ],
)
def test_non_torch_files_are_refused(tmp_path, content, reason):
    path = tmp_path / "foreign.pth.tar"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match=rf"foreign\.pth\.tar: {reason}"):
        load_checkpoint(path)


def test_truncated_checkpoint_is_refused(tmp_path):
    path = save_checkpoint(tmp_path / "ep0001.pth.tar", _checkpoint())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable PyTorch checkpoint file"):
        load_checkpoint(path)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"format": "pytracking"}, r"format tag 'pytracking'; expected format 'ebmtrack-checkpoint'"),
        ({"format": None}, r"no 'format' key"),
        ({"version": 2}, r"format version 2 is newer than this code reads \(1\)"),
        ({"version": "1"}, r"format version '1' is not an integer"),
        ({"net": None}, r"missing key\(s\) \['net'\]"),
        ({"net": {"w": 3}}, r"'net' is not a state dict"),
    ],
)
def test_wrong_tag_version_or_keys_are_refused(tmp_path, change, reason):
    data = {**_checkpoint(), **change}
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "ep0001.pth.tar"
    torch.save(data, path)  # bypasses save_checkpoint's own checks
    with pytest.raises(CheckpointError, match=reason):
        load_checkpoint(path)


def test_a_plain_tensor_file_is_not_a_checkpoint(tmp_path):
    torch.save(torch.zeros(3), tmp_path / "t.pth")
    with pytest.raises(CheckpointError, match=r"top level is a Tensor, not a dict"):
        load_checkpoint(tmp_path / "t.pth")
    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_checkpoint(tmp_path / "missing.pth")


def test_save_refuses_objects_before_writing_anything(tmp_path):
    with pytest.raises(TypeError, match=r"checkpoint\['config'\]\['g'\]: .*Gadget is not plain data"):
        save_checkpoint(tmp_path / "ep0001.pth.tar", {**_checkpoint(), "config": {"g": Gadget()}})
    with pytest.raises(ValueError, match=r"lacks required key\(s\) \['net'\]"):
        save_checkpoint(tmp_path / "ep0001.pth.tar", {k: v for k, v in _checkpoint().items() if k != "net"})
    assert not any(tmp_path.iterdir())


def test_listing_ignores_temp_files_and_stale_ones_are_removed(tmp_path):
    for epoch in (1, 2, 10):
        save_checkpoint(checkpoint_path(tmp_path, epoch), _checkpoint(epoch))
    (tmp_path / ".ep0011.pth.tar.abc123.tmp").write_bytes(b"half a checkpoint")
    (tmp_path / "notes.txt").write_text("x")
    assert [e for e, _ in list_checkpoints(tmp_path)] == [1, 2, 10]
    assert latest_checkpoint(tmp_path) == tmp_path / "ep0010.pth.tar"
    assert [p.name for p in remove_stale_temp_files(tmp_path)] == [".ep0011.pth.tar.abc123.tmp"]
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_run_dir_layout_and_bad_setting_names(tmp_path):
    assert run_dir(tmp_path, "dimp/nce_plus") == tmp_path / "checkpoints" / "dimp" / "nce_plus"
    for bad in ("nce_plus", "dimp/../x", "a/b/c", "/x"):
        with pytest.raises(ValueError, match="must look like '<module>/<name>'"):
            run_dir(tmp_path, bad)


def _cli(*paths):
    return subprocess.run(
        [sys.executable, "-m", "ltr.admin.checkpoint", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )


def test_cli_prints_version_setting_epoch_and_parameter_count_and_fails_clearly(tmp_path, capsys):
    good = save_checkpoint(checkpoint_path(tmp_path, 7), _checkpoint())
    evil = tmp_path / "evil.pth.tar"
    torch.save({**_checkpoint(), "config": Gadget()}, evil)
    text = tmp_path / "text.pth.tar"
    text.write_text("hello\n")

    assert checkpoint_main([str(good)]) == 0  # in-process for the good case; the process exit code below
    out = capsys.readouterr().out
    assert "format:     ebmtrack-checkpoint version 1" in out
    assert "setting:    dimp/nce_plus" in out
    assert "epoch:      7" in out
    assert "parameters: 8" in out

    bad = _cli(good, evil, text, tmp_path / "missing.pth.tar")
    assert bad.returncode == 2
    assert "epoch:      7" in bad.stdout  # the good file is still described
    errors = bad.stderr.strip().splitlines()
    assert len(errors) == 3, bad.stderr
    assert errors[0].startswith(f"error: {evil}: refused: the file holds pickled Python objects")
    assert errors[1].startswith(f"error: {text}: not a readable PyTorch checkpoint file")
    assert errors[2] == f"error: {tmp_path / 'missing.pth.tar'}: no such checkpoint file"
    assert "Traceback" not in bad.stderr
