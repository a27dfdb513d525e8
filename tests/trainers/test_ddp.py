"""Two gloo processes on CPU via torchrun: different samples per rank, identical weights after every step,
checkpoints and stats from rank 0 with every rank's RNG state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ltr.admin.checkpoint import list_checkpoints, load_checkpoint, run_dir
from ltr.admin.ports import free_port
from tests.trainers.toy import SETTING

REPO = Path(__file__).resolve().parents[2]


def _worker_args(tmp_path: Path, *extra: str) -> list[str]:
    out, ws = tmp_path / "out", tmp_path / "ws"
    return ["-m", "tests.trainers.ddp_worker", "--out", str(out), "--workspace", str(ws), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def _launch(tmp_path: Path, *extra: str) -> None:
    """Start two ranks directly with the variables torchrun sets (one interpreter fewer than torchrun)."""
    (tmp_path / "out").mkdir(parents=True, exist_ok=True)
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = {
            **_env(),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        cmd = [sys.executable, *_worker_args(tmp_path, *extra)]
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True))
    try:
        errors = [p.communicate(timeout=300)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], "\n".join(e[-3000:] for e in errors)


def test_two_process_ddp_on_cpu(tmp_path):
    _launch(tmp_path)
    _check_run(tmp_path)


@pytest.mark.slow
def test_two_process_resume_continues_every_rank_exactly(tmp_path):
    """2 epochs in one go == 1 epoch, stop, resume for the second: per-rank RNG states are restored."""
    _launch(tmp_path / "a", "--epochs", "2")
    _launch(tmp_path / "b", "--epochs", "1")
    _launch(tmp_path / "b", "--epochs", "2", "--resume")
    ca = load_checkpoint(run_dir(tmp_path / "a" / "ws", SETTING) / "ep0002.pth.tar")
    cb = load_checkpoint(run_dir(tmp_path / "b" / "ws", SETTING) / "ep0002.pth.tar")
    for key, value in ca["net"].items():
        assert torch.equal(value, cb["net"][key]), key
    for rank in range(2):
        for key, value in ca["rng"]["ranks"][rank].items():
            assert torch.equal(value, cb["rng"]["ranks"][rank][key]), (rank, key)
    for pid, state in ca["optimizer"]["state"].items():
        for key, value in state.items():
            assert torch.equal(value, cb["optimizer"]["state"][pid][key]), (pid, key)


@pytest.mark.slow
def test_two_process_ddp_through_torchrun(tmp_path):
    (tmp_path / "out").mkdir()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        *_worker_args(tmp_path),
    ]
    done = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    _check_run(tmp_path)


def _check_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r0 = torch.load(out / "rank0.pt", weights_only=True)
    r1 = torch.load(out / "rank1.pt", weights_only=True)
    assert (r0["rank"], r1["rank"], r0["world_size"], r0["backend"]) == (0, 1, 2, "gloo")
    assert r0["model_type"] == "DistributedDataParallel"
    # 64 samples split over 2 ranks, batch 4, 2 epochs: 16 steps per rank, disjoint samples in each epoch
    assert r0["seen"].shape == r1["seen"].shape == (16, 4)
    for epoch in range(2):
        a = set(r0["seen"][8 * epoch : 8 * epoch + 8].flatten().tolist())
        b = set(r1["seen"][8 * epoch : 8 * epoch + 8].flatten().tolist())
        assert not a & b and a | b == set(range(64))
    assert not torch.equal(r0["first_draw"], r1["first_draw"])  # seeds offset by rank
    # gradients are averaged: both ranks hold the same weights after every step, and the weights move
    assert torch.equal(r0["weights"], r1["weights"])
    assert (r0["weights"][1:] != r0["weights"][:-1]).any(dim=1).all()

    folder = run_dir(tmp_path / "ws", SETTING)
    assert [e for e, _ in list_checkpoints(folder)] == [1, 2]
    ckpt = load_checkpoint(folder / "ep0002.pth.tar")
    assert ckpt["rng"]["world_size"] == 2 and len(ckpt["rng"]["ranks"]) == 2
    assert not torch.equal(ckpt["rng"]["ranks"][0]["torch"], ckpt["rng"]["ranks"][1]["torch"])
    final = torch.cat([v.flatten() for k, v in ckpt["net"].items() if k != "ballast"])
    assert torch.equal(final, r0["weights"][-1])  # unwrapped names, the weights after the last step
    assert not any(k.startswith("module.") for k in ckpt["net"])
    stats = json.loads((folder / "stats.json").read_text())
    assert stats["meta"]["world_size"] == 2
    assert [r["samples"] for r in stats["history"]] == [64, 64]  # stats reduced over both ranks
