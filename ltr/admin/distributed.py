"""Distributed training helpers: process-group setup from ``torchrun`` variables, rank queries, seeds.

``torchrun --nproc_per_node=N ltr/run_training.py <module> <setting>`` sets ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` in every process; :func:`init_distributed` reads them and
creates the default process group (NCCL when the process trains on a GPU, gloo on CPU). A plain
``python ltr/run_training.py ...`` has none of them and runs as a single process (rank 0 of 1); every helper
here works in both cases, so callers never branch on "is this distributed".

Seeds: each rank's sampling differs, and each data-loader worker's differs within a rank, through
:func:`sample_seed` = ``base_seed + 1000 * rank + worker_id``.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

#: The environment variables ``torchrun`` sets that :func:`init_distributed` needs.
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")

#: Seed stride between ranks (worker ids stay below it).
RANK_SEED_STRIDE = 1000


class DistributedError(RuntimeError):
    """Bad or incomplete distributed launch environment; the message names the variable."""


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: ``rank`` of ``world_size`` processes, ``local_rank`` on its node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True when ``WORLD_SIZE`` is set to more than one process (the variables ``torchrun`` sets)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise DistributedError(
            f"WORLD_SIZE > 1 but the environment variable {name} is not set; launch with "
            f"`torchrun --nproc_per_node=N ltr/run_training.py ...` (it sets {', '.join(TORCHRUN_VARS)})"
        )
    try:
        return int(value)
    except ValueError as err:
        raise DistributedError(f"environment variable {name}={value!r} is not an integer") from err


def init_distributed(device: str = "auto", timeout_s: float = 1800.0) -> DistInfo:
    """Create the default process group from the ``torchrun`` variables, or report a single process.

    ``device``: ``auto|cpu|cuda`` (as on the command line). NCCL is used when the processes train on CUDA
    (each process takes GPU ``LOCAL_RANK``), gloo otherwise. Calling it again returns the existing group.
    """
    if dist.is_available() and dist.is_initialized():
        return current()
    if not launched_by_torchrun():
        return DistInfo()
    rank, world, local = _env_int("RANK"), _env_int("WORLD_SIZE"), _env_int("LOCAL_RANK")
    for name in ("MASTER_ADDR", "MASTER_PORT"):
        if not os.environ.get(name):
            _env_int(name)  # raises with the launch hint
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda:
        if not torch.cuda.is_available():
            raise DistributedError("device=cuda was asked for but CUDA is not available in this process")
        if local >= torch.cuda.device_count():
            raise DistributedError(
                f"LOCAL_RANK={local} but only {torch.cuda.device_count()} CUDA device(s) are visible; "
                "use --nproc_per_node <= the number of GPUs"
            )
        torch.cuda.set_device(local)
    backend = "nccl" if use_cuda else "gloo"
    dist.init_process_group(
        backend=backend,
        init_method="env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    return DistInfo(rank=rank, world_size=world, local_rank=local, backend=backend)


def current() -> DistInfo:
    """This process's :class:`DistInfo` (rank 0 of 1 when no process group exists)."""
    if not (dist.is_available() and dist.is_initialized()):
        return DistInfo()
    return DistInfo(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
        backend=str(dist.get_backend()),
    )


def rank() -> int:
    """Global rank of this process (0 without a process group)."""
    return current().rank


def world_size() -> int:
    """Number of training processes (1 without a process group)."""
    return current().world_size


def is_main_process() -> bool:
    """True on rank 0, the one process that writes checkpoints and logs."""
    return rank() == 0


def barrier() -> None:
    """Wait for every rank (no-op in a single process)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        if dist.get_backend() == "nccl":
            dist.barrier(device_ids=[torch.cuda.current_device()])
        else:
            dist.barrier()


def cleanup(synchronize: bool = True) -> None:
    """Destroy the default process group if one exists.

    With ``synchronize`` every rank first meets at a barrier, so that no rank tears its connections down while
    another is still using them (gloo then aborts the other rank with "terminate called without an active
    exception"). Pass False after an error, when the other ranks may never reach the barrier.
    """
    if dist.is_available() and dist.is_initialized():
        if synchronize:
            barrier()
        dist.destroy_process_group()


def sample_seed(base_seed: int, worker_id: int = 0, rank_: int | None = None) -> int:
    """Seed for data sampling in ``worker_id`` of rank ``rank_`` (default: this process's rank).

    ``base_seed + 1000 * rank + worker_id``; worker ids must stay below 1000 so that seeds never collide.
    """
    if not 0 <= worker_id < RANK_SEED_STRIDE:
        raise ValueError(f"worker_id={worker_id} must be in [0, {RANK_SEED_STRIDE})")
    r = rank() if rank_ is None else rank_
    return base_seed + RANK_SEED_STRIDE * r + worker_id


def all_gather_tensors(
    tensors: dict[str, torch.Tensor], device: torch.device
) -> list[dict[str, torch.Tensor]]:
    """Gather a dict of tensors (same keys, shapes and dtypes on every rank) from all ranks, on CPU.

    Returns one dict per rank, in rank order. In a single process: ``[tensors]``. ``device`` is where the
    collective runs (the process's CUDA device for NCCL, CPU for gloo).
    """
    info = current()
    if not info.distributed:
        return [dict(tensors)]
    gathered: list[dict[str, torch.Tensor]] = [{} for _ in range(info.world_size)]
    for key in sorted(tensors):
        local = tensors[key].to(device)
        parts = [torch.empty_like(local) for _ in range(info.world_size)]
        dist.all_gather(parts, local.contiguous())
        for r, part in enumerate(parts):
            gathered[r][key] = part.cpu()
    return gathered
