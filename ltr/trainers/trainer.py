"""The one generic trainer: an epoch loop that runs an actor, with all other behaviour in hooks.

The loop only does this, per epoch: move each batch to the device, ``loss, stats = actor(batch)`` (under
``torch.autocast`` when AMP is on), backward (through a ``GradScaler``), the global gradient norm (its
median, 90th percentile and maximum go into the epoch's record), optional gradient clipping, optimiser step,
and accumulate the stats. Everything else (LR schedule, validation, checkpoints, stats files, progress bar,
visdom) is a :class:`Hook`; see :mod:`ltr.trainers.hooks`.

Actor protocol: ``actor(batch) -> (loss, stats)`` where ``loss`` is a scalar tensor and ``stats`` maps names
to scalar tensors or floats (epoch means are logged). If the actor has a ``net`` attribute, it is pointed at
the ``DistributedDataParallel`` wrapper while a distributed run trains (so gradients are synchronised) and
back at the plain network afterwards. If the actor has a ``train(mode: bool)`` method, it is used to switch
train/eval mode (so an actor can keep frozen BatchNorm layers in eval mode); otherwise ``net.train(mode)``.

Resume is exact: a checkpoint holds weights, optimiser, scheduler, scaler, the stats history and every rank's
RNG state, all captured after the epoch's last hook that could consume randomness, so on CPU a run that stops
after epoch k and resumes produces bit-identical weights to one that never stopped.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from ltr.admin import device as device_lib
from ltr.admin import distributed
from ltr.admin.checkpoint import (
    FORMAT,
    VERSION,
    CheckpointError,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    remove_stale_temp_files,
)
from ltr.trainers.interrupt import TrainingInterrupted
from ltr.trainers.optim import group_lrs
from ltr.trainers.rng import capture_rng_state, restore_rng_state, seed_everything

Actor = Callable[[Any], tuple[Tensor, Mapping[str, Tensor | float]]]


class Hook:
    """Trainer behaviour plugged in at fixed points; override what you need. Lower ``priority`` runs first.

    Every hook runs on every rank (some collectives need all ranks); hooks that write files check
    ``trainer.is_main`` themselves.
    """

    priority: int = 50

    def before_train(self, trainer: Trainer) -> None:
        """After resume/DDP setup, before the first epoch."""

    def before_epoch(self, trainer: Trainer) -> None:
        """``trainer.epoch`` is the epoch about to run (1-based)."""

    def after_step(self, trainer: Trainer) -> None:
        """After each optimiser step; ``trainer.last_loss`` and ``trainer.last_stats`` hold its values."""

    def after_epoch(self, trainer: Trainer) -> None:
        """``trainer.history[-1]`` is the epoch's train record (validation hooks append theirs)."""

    def after_train(self, trainer: Trainer) -> None:
        """After the last epoch (not called when training raised)."""

    def on_interrupt(self, trainer: Trainer) -> None:
        """After Ctrl-C stopped training, before :class:`TrainingInterrupted` is raised (close progress bars)."""


def resolve_device(name: str | torch.device, info: distributed.DistInfo | None = None) -> torch.device:
    """:func:`ltr.admin.device.resolve_device` with this process's local rank in a distributed run."""
    info = info or distributed.current()
    return device_lib.resolve_device(name, local_rank=info.local_rank if info.distributed else None)


def move_to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor moved to ``device``: tensors, mappings, lists/tuples (namedtuples too) and
    objects with a ``to(device)`` method are handled; anything else is returned unchanged."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return type(batch)({k: move_to_device(v, device) for k, v in batch.items()})
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_to_device(v, device) for v in batch)
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device)
    return batch


def first_tensor(batch: Any) -> Tensor | None:
    """The first tensor found in a nested batch (depth first), or None."""
    if isinstance(batch, Tensor):
        return batch
    values: Iterable[Any] = ()
    if isinstance(batch, Mapping):
        values = batch.values()
    elif isinstance(batch, (list, tuple)):
        values = batch
    for v in values:
        t = first_tensor(v)
        if t is not None:
            return t
    return None


def grad_norm_stats(norms: Sequence[Tensor], clip: float | None) -> dict[str, float]:
    """An epoch's global gradient norms (scalar tensors, before clipping) -> its train-record entries.

    ``grad_norm`` is the median, with ``grad_norm_p90`` and ``grad_norm_max``; ``grad_clipped`` is the share
    of steps whose norm was above ``clip`` (only when clipping). Non-finite norms (steps the AMP scaler
    skips) are left out of the statistics and counted in ``grad_nonfinite``. One host read for the epoch.
    """
    if not norms:
        return {}
    values = torch.stack([n.to(torch.float64).reshape(()) for n in norms]).cpu()
    finite = values[torch.isfinite(values)]
    out = {"grad_nonfinite": float(len(values) - len(finite))}
    if len(finite):
        out.update(
            grad_norm=float(torch.quantile(finite, 0.5)),
            grad_norm_p90=float(torch.quantile(finite, 0.9)),
            grad_norm_max=float(finite.max()),
        )
        if clip is not None:
            out["grad_clipped"] = float((finite > clip).to(torch.float64).mean())
    return out


class StatsMeter:
    """Sample-weighted sums of scalar stats; values stay tensors (no host sync) until :meth:`means`."""

    def __init__(self) -> None:
        self.sums: dict[str, Tensor | float] = {}
        self.count = 0

    def add(self, stats: Mapping[str, Tensor | float], n: int) -> None:
        for key, value in stats.items():
            v = value.detach().to(torch.float64) * n if isinstance(value, Tensor) else float(value) * n
            self.sums[key] = self.sums.get(key, 0.0) + v
        self.count += n

    def means(self, device: torch.device) -> tuple[dict[str, float], int]:
        """``(means, samples)`` over all samples of all ranks (one all-reduce in a distributed run)."""
        keys = sorted(self.sums)
        vals = [torch.as_tensor(self.sums[k], dtype=torch.float64, device=device).reshape(()) for k in keys]
        packed = torch.stack([*vals, torch.tensor(float(self.count), dtype=torch.float64, device=device)])
        if distributed.world_size() > 1:
            dist.all_reduce(packed)
        totals = packed.tolist()
        count = totals[-1]
        return {k: (s / count if count else float("nan")) for k, s in zip(keys, totals[:-1])}, int(count)


class Trainer:
    """Train ``net`` through ``actor`` for ``epochs`` epochs; behaviour in ``hooks`` (see module docstring).

    ``net`` is moved to ``device``; ``optimizer`` (and ``scheduler``) must already hold ``net``'s parameters.
    ``run_dir`` is the run folder for checkpoints and logs (None: nothing is written). ``config`` is the
    resolved config as plain data (stored in checkpoints). ``generators`` are named ``torch.Generator``s
    (e.g. a loader's) whose state is checkpointed with the global RNGs. ``batch_size_fn(batch) -> int``
    counts samples; by default a loader with ``drop_last`` gives its ``batch_size`` and otherwise dim 0 of
    the first tensor in the batch is used.
    """

    def __init__(
        self,
        *,
        actor: Actor,
        net: nn.Module,
        optimizer: torch.optim.Optimizer,
        train_loader: Iterable[Any],
        epochs: int,
        scheduler: Any | None = None,
        hooks: Sequence[Hook] = (),
        device: str | torch.device = "auto",
        grad_clip: float | None = None,
        amp: bool = False,
        setting: str = "",
        config: Mapping[str, Any] | None = None,
        run_dir: str | Path | None = None,
        seed: int = 0,
        generators: Mapping[str, torch.Generator] | None = None,
        find_unused_parameters: bool = False,
        batch_size_fn: Callable[[Any], int] | None = None,
        check_finite: bool = True,
        verbose: bool = True,
    ) -> None:
        if epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {epochs}")
        if grad_clip is not None and not grad_clip > 0:
            raise ValueError(f"grad_clip must be > 0 or None, got {grad_clip}")
        self.dist = distributed.current()
        self.device = resolve_device(device, self.dist)
        self.actor = actor
        self.net = net.to(self.device)
        self.model: nn.Module = self.net
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.train_loader = train_loader
        self.epochs = epochs
        self.hooks = sorted(hooks, key=lambda h: h.priority)
        self.grad_clip = grad_clip
        self.verbose = verbose
        if amp and self.device.type != "cuda":
            self.log(f"note: AMP is only used on CUDA; training in float32 on {self.device}")
            amp = False
        self.amp = amp
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)
        self.setting = setting
        self.config = dict(config or {})
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.seed = seed
        self.generators = dict(generators or {})
        self.find_unused_parameters = find_unused_parameters
        self._custom_batch_size_fn = batch_size_fn
        self.batch_size_fn = batch_size_fn or self._default_batch_size
        self.check_finite = check_finite
        self.epoch = 0  # last completed epoch, or the running one inside the loop
        self.step = 0  # steps done in the running epoch
        self.global_step = 0
        self.history: list[dict[str, Any]] = []
        self.last_loss: Tensor | None = None
        self.last_stats: Mapping[str, Tensor | float] = {}
        self.meter = StatsMeter()
        self.resumed_from: Path | None = None
        self._trainable = [p for p in self.net.parameters() if p.requires_grad]
        self._grad_norms: list[Tensor] = []  # this epoch's global gradient norms, before clipping

    # ----------------------------------------------------------------------------------------------- utils
    @property
    def is_main(self) -> bool:
        return self.dist.is_main

    def log(self, message: str) -> None:
        """Print ``message`` to stderr on rank 0 (when verbose)."""
        if self.verbose and self.is_main:
            print(message, file=sys.stderr, flush=True)

    def _default_batch_size(self, batch: Any) -> int:
        return self._count_samples(self.train_loader, batch)

    def _count_samples(self, loader: Any, batch: Any) -> int:
        """Samples in ``batch`` from ``loader``: ``batch_size_fn`` if given, else the loader's ``batch_size``
        when it drops partial batches, else dim 0 of the first tensor."""
        if self._custom_batch_size_fn is not None:
            return int(self._custom_batch_size_fn(batch))
        size = getattr(loader, "batch_size", None)
        if isinstance(size, int) and getattr(loader, "drop_last", False):
            return size
        t = first_tensor(batch)
        if t is None or t.dim() == 0:
            raise ValueError("cannot count the samples of a batch without tensors; pass batch_size_fn")
        return int(t.shape[0])

    def _set_mode(self, train: bool) -> None:
        mode_fn = getattr(self.actor, "train", None)
        if callable(mode_fn):
            mode_fn(train)
        else:
            self.net.train(train)

    def _call_hooks(self, event: str) -> None:
        for hook in self.hooks:
            getattr(hook, event)(self)

    # ------------------------------------------------------------------------------------------ checkpoints
    def checkpoint_state(self) -> dict[str, Any]:
        """The checkpoint dict of the current state (a collective: every rank must call it)."""
        rng_local = capture_rng_state(self.generators)
        collective_device = self.device if self.dist.backend == "nccl" else torch.device("cpu")
        ranks = distributed.all_gather_tensors(rng_local, collective_device)
        state: dict[str, Any] = {
            "format": FORMAT,
            "version": VERSION,
            "setting": self.setting,
            "epoch": self.epoch,
            "config": self.config,
            "net": {k: v.detach().cpu() for k, v in self.net.state_dict().items()},
            "optimizer": self.optimizer.state_dict(),
            "stats": {"history": [dict(r) for r in self.history], "global_step": self.global_step},
            "rng": {"world_size": self.dist.world_size, "ranks": ranks},
            "num_parameters": sum(p.numel() for p in self.net.parameters()),
            "num_trainable": sum(p.numel() for p in self._trainable),
        }
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.amp:
            state["scaler"] = self.scaler.state_dict()
        return state

    def load_checkpoint_state(self, ckpt: Mapping[str, Any], path: str | Path = "<checkpoint>") -> None:
        """Continue from ``ckpt`` (a validated checkpoint dict): weights, optimiser, scheduler, scaler, stats,
        epoch counter and this rank's RNG state."""
        if self.setting and ckpt["setting"] != self.setting:
            raise CheckpointError(
                f"{path}: holds setting {ckpt['setting']!r}, but this run is {self.setting!r}"
            )
        try:
            self.net.load_state_dict(ckpt["net"])
        except RuntimeError as err:
            raise CheckpointError(
                f"{path}: weights do not fit the network built from the config: {err}"
            ) from err
        if "optimizer" not in ckpt:
            raise CheckpointError(f"{path}: has no optimizer state; it cannot be resumed from")
        self.optimizer.load_state_dict(ckpt["optimizer"])
        if self.scheduler is not None:
            if "scheduler" not in ckpt:
                raise CheckpointError(f"{path}: has no scheduler state; it cannot be resumed from")
            self.scheduler.load_state_dict(ckpt["scheduler"])
        if self.amp and "scaler" in ckpt:
            self.scaler.load_state_dict(ckpt["scaler"])
        stats = ckpt.get("stats", {})
        self.history = [dict(r) for r in stats.get("history", [])]
        self.global_step = int(stats.get("global_step", 0))
        self.epoch = int(ckpt["epoch"])
        rng = ckpt.get("rng", {})
        if (
            rng.get("world_size") == self.dist.world_size
            and len(rng.get("ranks", [])) == self.dist.world_size
        ):
            restore_rng_state(rng["ranks"][self.dist.rank], self.generators)
        else:
            warnings.warn(
                f"{path}: written by {rng.get('world_size')} process(es), now {self.dist.world_size}; "
                "the data order after resuming is reseeded, not continued exactly",
                stacklevel=2,
            )
            seed_everything(distributed.sample_seed(self.seed + 7919 * self.epoch))
        differing = sorted(
            k for k in set(ckpt["config"]) | set(self.config) if ckpt["config"].get(k) != self.config.get(k)
        )
        if self.config and differing:
            self.log(f"note: config differs from the checkpoint's in {differing}; using the current values")

    def resume(self) -> Path | None:
        """Load the latest checkpoint of ``run_dir`` (None and a note when there is none)."""
        if self.run_dir is None:
            raise ValueError("resume needs a run_dir")
        if self.is_main:
            for path in remove_stale_temp_files(self.run_dir):
                self.log(f"removed {path} (left by an interrupted write)")
        path = latest_checkpoint(self.run_dir)
        if path is None:
            self.log(f"nothing to resume in {self.run_dir}; starting at epoch 1")
            return None
        self.load_checkpoint_state(load_checkpoint(path, map_location="cpu"), path)
        self.resumed_from = path
        self.log(f"resumed from {path} (epoch {self.epoch})")
        return path

    # ------------------------------------------------------------------------------------------------ loop
    def train(self, resume: bool = False) -> list[dict[str, Any]]:
        """Run epochs ``epoch+1 .. epochs``; returns the stats history.

        Without ``resume`` a run folder that already holds checkpoints is an error (nothing is overwritten).
        Ctrl-C (``KeyboardInterrupt``) in the loop raises :class:`TrainingInterrupted` naming the running epoch
        and the last checkpoint on disk, after the hooks' ``on_interrupt``.
        """
        if resume:
            self.resume()
        elif self.run_dir is not None:
            existing = list_checkpoints(self.run_dir)
            if existing:
                raise CheckpointError(
                    f"{self.run_dir} already holds checkpoints up to epoch {existing[-1][0]}; pass --resume "
                    "to continue that run, or choose another workspace / remove the folder to start over"
                )
        self._wrap()
        try:
            self._call_hooks("before_train")
            for epoch in range(self.epoch + 1, self.epochs + 1):
                self.epoch = epoch
                self._set_loader_epoch(epoch)
                self._call_hooks("before_epoch")
                self.history.append(self.train_epoch())
                self._call_hooks("after_epoch")
            self._call_hooks("after_train")
        except KeyboardInterrupt:
            self._call_hooks("on_interrupt")
            raise TrainingInterrupted.from_run(self.epoch, self.run_dir) from None
        finally:
            self._unwrap()
        return self.history

    def _wrap(self) -> None:
        if self.dist.distributed and self.model is self.net:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.model = nn.parallel.DistributedDataParallel(
                self.net, device_ids=ids, find_unused_parameters=self.find_unused_parameters
            )
        if hasattr(self.actor, "net"):
            self.actor.net = self.model

    def _unwrap(self) -> None:
        if hasattr(self.actor, "net"):
            self.actor.net = self.net

    def _set_loader_epoch(self, epoch: int) -> None:
        for obj in (
            self.train_loader,
            getattr(self.train_loader, "sampler", None),
            getattr(self.train_loader, "batch_sampler", None),
            getattr(self.train_loader, "dataset", None),
        ):
            set_epoch = getattr(obj, "set_epoch", None)
            if callable(set_epoch):
                set_epoch(epoch)

    def train_epoch(self) -> dict[str, Any]:
        """One pass over the train loader; returns the epoch's train record."""
        self._set_mode(True)
        self.meter = StatsMeter()
        record: dict[str, Any] = {"epoch": self.epoch, "phase": "train", **group_lrs(self.optimizer)}
        self.step = 0
        self._grad_norms = []
        start = time.perf_counter()
        data_time = 0.0
        mark = start
        for batch in self.train_loader:
            data_time += time.perf_counter() - mark
            n = self.batch_size_fn(batch)
            loss, stats = self._train_step(batch)
            self.meter.add({"loss": loss, **stats}, n)
            self.last_loss, self.last_stats = loss.detach(), stats
            self.step += 1
            self.global_step += 1
            self._call_hooks("after_step")
            mark = time.perf_counter()
        if self.step == 0:
            raise RuntimeError(f"epoch {self.epoch}: the train loader yielded no batch")
        means, samples = self.meter.means(self.device)
        elapsed = time.perf_counter() - start
        record.update(means)
        record.update(grad_norm_stats(self._grad_norms, self.grad_clip))
        record.update(
            samples=samples,
            steps=self.step,
            time_s=elapsed,
            data_time_s=data_time,
            samples_per_s=samples / elapsed if elapsed > 0 else float("nan"),
        )
        return record

    def _train_step(self, batch: Any) -> tuple[Tensor, Mapping[str, Tensor | float]]:
        batch = move_to_device(batch, self.device)
        with torch.autocast(device_type=self.device.type, dtype=torch.float16, enabled=self.amp):
            loss, stats = self.actor(batch)
        if self.check_finite and not bool(torch.isfinite(loss.detach()).all()):
            raise FloatingPointError(
                f"{self.setting or 'training'}: epoch {self.epoch} step {self.step + 1}: "
                f"loss is {loss.item()} "
                f"(stats: { {k: float(v) for k, v in stats.items()} })"
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # no-op without AMP; the step does not unscale twice
        if self.grad_clip is not None:
            norm = torch.nn.utils.clip_grad_norm_(self._trainable, self.grad_clip)
        else:
            norm = torch.nn.utils.get_total_norm([p.grad for p in self._trainable if p.grad is not None])
        self._grad_norms.append(norm.detach())
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss, stats

    @torch.no_grad()
    def evaluate(self, loader: Iterable[Any], phase: str = "val") -> dict[str, Any]:
        """Run the actor over ``loader`` without gradients in eval mode; returns a record for ``phase``."""
        self._set_mode(False)
        meter = StatsMeter()
        start = time.perf_counter()
        steps = 0
        try:
            for batch in loader:
                batch = move_to_device(batch, self.device)
                with torch.autocast(device_type=self.device.type, dtype=torch.float16, enabled=self.amp):
                    loss, stats = self.actor(batch)
                meter.add({"loss": loss, **stats}, self._count_samples(loader, batch))
                steps += 1
        finally:
            self._set_mode(True)
        means, samples = meter.means(self.device)
        elapsed = time.perf_counter() - start
        return {
            "epoch": self.epoch,
            "phase": phase,
            **means,
            "samples": samples,
            "steps": steps,
            "time_s": elapsed,
        }
