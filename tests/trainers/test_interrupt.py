"""Ctrl-C during training: a real SIGINT stops the loop with TrainingInterrupted (epoch running, epoch on disk),
and the command line prints one line with the exact --resume command instead of a traceback."""

from __future__ import annotations

import os
import shlex
import signal
import threading
import time

import pytest
import torch

from ltr.admin.checkpoint import list_checkpoints, run_dir
from ltr.cli.train import main as train_main
from ltr.trainers import Hook, TrainingInterrupted
from ltr.trainers.interrupt import interrupted_message
from tests.trainers.test_dimp_settings import SMALL
from tests.trainers.toy import SETTING, build


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler, which turns Ctrl-C into KeyboardInterrupt. A test run started in the
    background by a non-interactive shell (``make test &``) inherits SIGINT ignored, and Python then installs
    no handler, so a raised SIGINT would do nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


class CtrlC(Hook):
    """Sends this process a real SIGINT (what Ctrl-C in a terminal does) at one step of one epoch."""

    def __init__(self, epoch: int, step: int) -> None:
        self.at = (epoch, step)
        self.closed_bars = 0

    def after_step(self, trainer) -> None:
        if (trainer.epoch, trainer.step) == self.at:
            signal.raise_signal(signal.SIGINT)

    def on_interrupt(self, trainer) -> None:
        self.closed_bars += 1


def test_sigint_in_the_loop_names_the_epoch_on_disk_and_resume_continues(tmp_path):
    ctrl_c = CtrlC(epoch=3, step=2)
    trainer, _ = build(tmp_path, epochs=4, extra_hooks=[ctrl_c])
    with pytest.raises(TrainingInterrupted) as err:
        trainer.train()
    folder = run_dir(tmp_path, SETTING)
    assert (err.value.epoch, err.value.saved_epoch, err.value.checkpoint) == (3, 2, folder / "ep0002.pth.tar")
    assert isinstance(err.value, KeyboardInterrupt) and ctrl_c.closed_bars == 1
    assert [e for e, _ in list_checkpoints(folder)] == [1, 2]
    line = interrupted_message(err.value, "RESUME", "RESTART")
    assert (
        line
        == f"interrupted in epoch 3: epoch 2 is safely on disk ({folder / 'ep0002.pth.tar'}); resume with `RESUME`"
    )
    resumed, _ = build(tmp_path, epochs=4)
    resumed.train(resume=True)
    assert [e for e, _ in list_checkpoints(folder)] == [1, 2, 3, 4]


def test_sigint_before_the_first_checkpoint_says_nothing_was_saved(tmp_path):
    trainer, _ = build(tmp_path, epochs=2, extra_hooks=[CtrlC(epoch=1, step=1)])
    with pytest.raises(TrainingInterrupted) as err:
        trainer.train()
    assert (err.value.epoch, err.value.saved_epoch, err.value.checkpoint) == (1, None, None)
    assert interrupted_message(err.value, "RESUME", "RESTART") == (
        "interrupted in epoch 1: no epoch finished, nothing was saved; start again with `RESTART`"
    )
    assert interrupted_message(KeyboardInterrupt(), "RESUME", "RESTART") == (
        "interrupted; whatever this run saved is kept: continue with `RESUME`"
    )


def _interrupt_after_first_checkpoint(folder, done: threading.Event) -> None:
    """Ctrl-C as a user gives it: a SIGINT from outside the training loop, once epoch 1 is on disk."""
    deadline = time.monotonic() + 120
    while not done.is_set() and time.monotonic() < deadline:
        if (folder / "ep0001.pth.tar").is_file():
            os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.005)


@pytest.mark.slow  # three short epochs of the tiny DiMP setting through the command line: ~8 s of CPU
def test_ctrl_c_in_run_training_prints_the_resume_command_and_it_works(tmp_path, capsys):
    torch.set_num_threads(1)
    ws = tmp_path / "my ws"  # a space: the printed command must quote it
    argv = ["dimp", "nce_plus_tiny", *SMALL, "trainer.epochs=3", "trainer.progress=false"]
    argv += ["--workspace", str(ws), "--device", "cpu"]
    folder = run_dir(ws, "dimp/nce_plus_tiny")
    done = threading.Event()
    sender = threading.Thread(target=_interrupt_after_first_checkpoint, args=(folder, done))
    sender.start()
    try:
        with pytest.raises(SystemExit) as exit_:
            train_main(argv)
    finally:
        done.set()
        sender.join()
    assert exit_.value.code == 130
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    saved = [e for e, _ in list_checkpoints(folder)]
    assert saved and saved[-1] < 3
    head = f"epoch {saved[-1]} is safely on disk ({folder / f'ep{saved[-1]:04d}.pth.tar'}); resume with `"
    assert head in last and last.endswith("--resume`")
    command = shlex.split(last.split("`")[1])
    assert command[:2] == ["python", "ltr/run_training.py"] and command[2:] == [*argv, "--resume"]
    train_main(command[2:])  # the printed command continues the run to its end
    assert [e for e, _ in list_checkpoints(folder)] == [1, 2, 3]
