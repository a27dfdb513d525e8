"""Standard trainer hooks: LR schedule, validation, stats files, progress bar, visdom curves, checkpoints.

Order at the end of an epoch (by ``priority``): progress bar closes (5), LR schedule steps (10), validation
runs (20), visdom curves are posted (40), the checkpoint is written (90), stats files are rewritten (95). The
checkpoint comes after everything that can consume randomness (validation), which is what makes a resumed
run continue exactly; the stats files come after it, so they never list an epoch that has no checkpoint.
Last, a summary line is printed (97).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ltr.admin import distributed
from ltr.admin.checkpoint import checkpoint_path, save_checkpoint
from ltr.admin.config import save_json
from ltr.admin.stats import DEFAULT_VISDOM_PORT, DEFAULT_VISDOM_SERVER, VisdomPlotter, write_stats
from ltr.trainers.trainer import Hook, Trainer

CONFIG_JSON = "config.json"
#: Record keys that are not curves.
_NOT_CURVES = frozenset({"epoch", "phase", "samples", "steps"})


class LRScheduleHook(Hook):
    """Step ``trainer.scheduler`` once at the end of every epoch, or after every optimiser step with
    ``per_step`` (schedules given in iterations, e.g. warm-up + cosine or a StepLR counted in steps)."""

    priority = 10

    def __init__(self, per_step: bool = False) -> None:
        self.per_step = per_step

    def after_step(self, trainer: Trainer) -> None:
        if self.per_step and trainer.scheduler is not None:
            trainer.scheduler.step()

    def after_epoch(self, trainer: Trainer) -> None:
        if not self.per_step and trainer.scheduler is not None:
            trainer.scheduler.step()


class ValidationHook(Hook):
    """Evaluate on ``loader`` every ``every`` epochs and after the last epoch; appends a ``val`` record.

    The loader's epoch is never advanced, so a seeded validation loader gives the same samples every time
    and the validation numbers of different epochs are comparable.
    """

    priority = 20

    def __init__(self, loader: Iterable[Any], every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"validation interval must be >= 1, got {every}")
        self.loader = loader
        self.every = every

    def after_epoch(self, trainer: Trainer) -> None:
        if trainer.epoch % self.every == 0 or trainer.epoch == trainer.epochs:
            trainer.history.append(trainer.evaluate(self.loader, phase="val"))


class StatsFileHook(Hook):
    """Rewrite ``stats.csv`` and ``stats.json`` in the run folder from the history (rank 0 only)."""

    priority = 95

    def _write(self, trainer: Trainer) -> None:
        if trainer.is_main and trainer.run_dir is not None:
            meta = {
                "setting": trainer.setting,
                "world_size": trainer.dist.world_size,
                "epochs": trainer.epochs,
            }
            write_stats(trainer.run_dir, trainer.history, meta)

    def before_train(self, trainer: Trainer) -> None:
        if trainer.history:  # resumed: drop the records of an epoch lost after the checkpoint
            self._write(trainer)

    def after_epoch(self, trainer: Trainer) -> None:
        self._write(trainer)


class ProgressHook(Hook):
    """A tqdm bar per epoch on rank 0 showing the running mean loss and samples/s.

    The loss is read from the device every ``interval`` steps only (each read is a host synchronisation).
    """

    priority = 5

    def __init__(self, interval: int = 10, enabled: bool = True) -> None:
        self.interval = max(1, interval)
        self.enabled = enabled
        self.bar: Any = None
        self._start = 0.0
        self._samples = 0

    def before_epoch(self, trainer: Trainer) -> None:
        if not (self.enabled and trainer.is_main):
            return
        from tqdm import tqdm

        total = len(trainer.train_loader) if hasattr(trainer.train_loader, "__len__") else None
        self.bar = tqdm(
            total=total, desc=f"epoch {trainer.epoch}/{trainer.epochs}", dynamic_ncols=True, mininterval=1.0
        )
        self._start = time.perf_counter()
        self._samples = 0

    def after_step(self, trainer: Trainer) -> None:
        if self.bar is None:
            return
        self.bar.update(1)
        self._samples = trainer.meter.count * trainer.dist.world_size
        if trainer.step % self.interval == 0:
            loss_sum = trainer.meter.sums.get("loss", 0.0)
            loss = float(loss_sum) / max(trainer.meter.count, 1)
            rate = self._samples / max(time.perf_counter() - self._start, 1e-9)
            self.bar.set_postfix(loss=f"{loss:.4f}", samples_per_s=f"{rate:.1f}")

    def after_epoch(self, trainer: Trainer) -> None:
        if self.bar is not None:
            record = trainer.history[-1]
            self.bar.set_postfix(loss=f"{record['loss']:.4f}", samples_per_s=f"{record['samples_per_s']:.1f}")
            self.bar.close()
            self.bar = None

    def on_interrupt(self, trainer: Trainer) -> None:
        if self.bar is not None:  # the interruption's message starts on a line of its own
            self.bar.close()
            self.bar = None


class SummaryHook(Hook):
    """One line per epoch on rank 0 (stderr, when the trainer is verbose): losses, speed, LRs."""

    priority = 97

    def after_epoch(self, trainer: Trainer) -> None:
        records = [r for r in trainer.history if r["epoch"] == trainer.epoch]
        parts = []
        for record in records:
            if "loss" not in record:  # e.g. a validation loader that yielded no full batch
                parts.append(f"{record['phase']}: no batches")
                continue
            parts.append(f"{record['phase']} loss {record['loss']:.4f}")
            if record["phase"] == "train":
                parts.append(f"{record['samples_per_s']:.1f} samples/s")
                lrs = sorted({v for k, v in record.items() if k.startswith("lr/")})
                parts.append("lr " + "/".join(f"{v:.2g}" for v in lrs))
                if "grad_norm" in record:
                    grad = f"grad norm {record['grad_norm']:.3g} (p90 {record['grad_norm_p90']:.3g}, max "
                    grad += f"{record['grad_norm_max']:.3g}"
                    if "grad_clipped" in record:
                        grad += f", {100 * record['grad_clipped']:.0f}% clipped"
                    parts.append(grad + ")")
        trainer.log(f"epoch {trainer.epoch}/{trainer.epochs}: " + ", ".join(parts))


class VisdomHook(Hook):
    """Post every scalar of each epoch's records as a curve to a visdom server (rank 0 only).

    The connection is checked before the first epoch; with no server the run stops at once with instructions
    (raise_exceptions: no curve is ever dropped silently). The visdom environment defaults to the setting.
    """

    priority = 40

    def __init__(
        self,
        *,
        server: str = DEFAULT_VISDOM_SERVER,
        port: int = DEFAULT_VISDOM_PORT,
        env: str | None = None,
        curves: Sequence[str] | None = None,
    ) -> None:
        self.server = server
        self.port = port
        self.env = env
        self.curves = set(curves) if curves is not None else None
        self.plotter: VisdomPlotter | None = None
        self._posted = 0

    def before_train(self, trainer: Trainer) -> None:
        if not trainer.is_main:
            return
        env = self.env or (trainer.setting.replace("/", "_") if trainer.setting else "main")
        self.plotter = VisdomPlotter(env=env, server=self.server, port=self.port)
        self._posted = len(trainer.history)  # resumed: earlier epochs were posted by the earlier run

    def after_epoch(self, trainer: Trainer) -> None:
        if self.plotter is None:
            return
        for record in trainer.history[self._posted :]:
            for key, value in record.items():
                if key in _NOT_CURVES or not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                if self.curves is not None and key not in self.curves:
                    continue
                if math.isfinite(value):
                    self.plotter.plot(key, str(record["phase"]), record["epoch"], value)
        self._posted = len(trainer.history)


class CheckpointHook(Hook):
    """Write ``epNNNN.pth.tar`` every ``every`` epochs and after the last one (rank 0, atomically).

    Before training, rank 0 writes the resolved config as ``config.json`` in the run folder. All ranks meet
    at a barrier after each checkpoint so that no rank runs ahead of a checkpoint being written.
    """

    priority = 90

    def __init__(self, every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"checkpoint interval must be >= 1, got {every}")
        self.every = every

    def before_train(self, trainer: Trainer) -> None:
        if trainer.run_dir is not None and trainer.is_main:
            Path(trainer.run_dir).mkdir(parents=True, exist_ok=True)
            save_json(trainer.config, Path(trainer.run_dir) / CONFIG_JSON)
        distributed.barrier()

    def after_epoch(self, trainer: Trainer) -> None:
        if trainer.run_dir is None:
            return
        if trainer.epoch % self.every and trainer.epoch != trainer.epochs:
            return
        state = trainer.checkpoint_state()  # collective: every rank takes part
        if trainer.is_main:
            save_checkpoint(checkpoint_path(trainer.run_dir, trainer.epoch), state)
        distributed.barrier()


def standard_hooks(
    *,
    val_loader: Iterable[Any] | None = None,
    val_every: int = 1,
    checkpoint_every: int = 1,
    progress: bool = True,
    visdom: bool = False,
    visdom_port: int = DEFAULT_VISDOM_PORT,
    extra: Sequence[Hook] = (),
) -> list[Hook]:
    """The usual set: LR schedule, validation (when ``val_loader``), stats files, progress bar, epoch summary
    line, visdom (when asked), checkpoints, plus ``extra``."""
    hooks: list[Hook] = [
        SummaryHook(),
        LRScheduleHook(),
        StatsFileHook(),
        ProgressHook(enabled=progress),
        CheckpointHook(checkpoint_every),
    ]
    if val_loader is not None:
        hooks.append(ValidationHook(val_loader, every=val_every))
    if visdom:
        hooks.append(VisdomHook(port=visdom_port))
    return hooks + list(extra)
