"""Ctrl-C during training: what is safely on disk, and the one line that says how to continue.

:meth:`ltr.trainers.Trainer.train` turns a ``KeyboardInterrupt`` into :class:`TrainingInterrupted`, which
knows the epoch that was running and the last checkpoint on disk (checkpoints are written atomically, so
the newest ``epNNNN.pth.tar`` is complete). The command line prints :func:`interrupted_message` instead of a
traceback.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from ltr.admin.checkpoint import list_checkpoints


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C during ``epoch``; ``saved_epoch`` / ``checkpoint``: the last epoch on disk
    and its file (None when none was written). Still a ``KeyboardInterrupt``, so code that lets Ctrl-C pass
    (``except Exception``) keeps doing so."""

    def __init__(self, epoch: int, saved_epoch: int | None, checkpoint: Path | None) -> None:
        super().__init__(epoch, saved_epoch, checkpoint)
        self.epoch = epoch
        self.saved_epoch = saved_epoch
        self.checkpoint = checkpoint

    @classmethod
    def from_run(cls, epoch: int, run_dir: str | Path | None) -> TrainingInterrupted:
        """The interruption of ``epoch`` with the newest checkpoint found in ``run_dir`` (if any)."""
        found = list_checkpoints(run_dir) if run_dir is not None else []
        return cls(epoch, found[-1][0], found[-1][1]) if found else cls(epoch, None, None)


def command_line(prog: str, args: Sequence[str]) -> str:
    """``prog`` followed by ``args``, each quoted for a POSIX shell where needed."""
    return " ".join([prog, *(shlex.quote(a) for a in args)])


def interrupted_message(err: KeyboardInterrupt, resume_command: str, restart_command: str) -> str:
    """One line for a Ctrl-C: the epoch safely on disk and the exact command that continues from it.

    ``resume_command`` continues the run (``--resume``); ``restart_command`` is the same run without it, for
    an interruption before the first checkpoint. A plain ``KeyboardInterrupt`` (not from the trainer's loop,
    e.g. while the data was being prepared, or a setting with its own loop) says only how to resume.
    """
    if not isinstance(err, TrainingInterrupted):
        return f"interrupted; whatever this run saved is kept: continue with `{resume_command}`"
    if err.saved_epoch is None:
        return (
            f"interrupted in epoch {err.epoch}: no epoch finished, nothing was saved; start again with "
            f"`{restart_command}`"
        )
    return (
        f"interrupted in epoch {err.epoch}: epoch {err.saved_epoch} is safely on disk ({err.checkpoint}); "
        f"resume with `{resume_command}`"
    )
