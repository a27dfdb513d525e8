"""kill -9 during training loses at most the running epoch; --resume continues exactly from the last one."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from ltr.admin.checkpoint import list_checkpoints, load_checkpoint, run_dir
from tests.trainers.toy import SETTING, build

REPO = Path(__file__).resolve().parents[2]


def _toy_cmd(workspace: Path, epochs: int, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.trainers.toy",
        "--workspace",
        str(workspace),
        "--epochs",
        str(epochs),
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def test_sigkill_mid_epoch_then_resume_continues_from_the_last_complete_epoch(tmp_path):
    folder = run_dir(tmp_path, SETTING)
    # 8 steps x 20 ms per epoch and a 6 MB checkpoint each epoch: the kill lands inside a step or a write
    proc = subprocess.Popen(
        _toy_cmd(tmp_path, 200, "--sleep", "0.02", "--buffer-mb", "6"),
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (folder / "ep0002.pth.tar").exists():
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "no second checkpoint within 120 s"
            time.sleep(0.02)
        time.sleep(random.Random(os.getpid()).uniform(0.0, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL

    saved = list_checkpoints(folder)
    last = saved[-1][0]
    assert [e for e, _ in saved] == list(range(1, last + 1))
    for epoch, path in saved:  # every named checkpoint is complete and loads safely
        assert load_checkpoint(path)["epoch"] == epoch
    stats = json.loads((folder / "stats.json").read_text())["history"]
    assert max(r["epoch"] for r in stats) in (last - 1, last)  # written after each checkpoint

    target = last + 2
    done = subprocess.run(
        _toy_cmd(tmp_path, target, "--resume", "--buffer-mb", "6"),
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert [e for e, _ in list_checkpoints(folder)] == list(range(1, target + 1))
    assert not list(folder.glob(".*.tmp"))  # leftovers of an interrupted write are cleaned up
    history = json.loads((folder / "stats.json").read_text())["history"]
    train_epochs = [r["epoch"] for r in history if r["phase"] == "train"]
    assert train_epochs == list(range(1, target + 1))  # no epoch lost twice or repeated

    # and the weights are exactly those of a run that was never interrupted
    torch.set_num_threads(1)
    reference, _ = build(None, epochs=target, buffer_mb=6)
    reference.train()
    final = load_checkpoint(folder / f"ep{target:04d}.pth.tar")
    for name, value in reference.net.state_dict().items():
        assert torch.equal(final["net"][name], value), name
