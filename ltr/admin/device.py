"""One meaning of ``--device auto|cpu|cuda[:N]`` for every command (training, tracking, studies)."""

from __future__ import annotations

import torch

from ltr.admin.config import ConfigError


class DeviceError(ConfigError):
    """An unknown device name, or CUDA asked for where there is none (a ValueError, like other bad options)."""


def resolve_device(name: str | torch.device, *, local_rank: int | None = None) -> torch.device:
    """``auto`` -> CUDA if available else CPU; ``cuda`` -> ``cuda:<local_rank>`` in a distributed run (else the
    current CUDA device); ``cuda:N`` as given. CUDA without a GPU is an error that says what to use instead."""
    if isinstance(name, torch.device):
        return name
    if name not in ("auto", "cpu", "cuda") and not name.startswith("cuda:"):
        raise DeviceError(f"device must be auto, cpu or cuda, got {name!r}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device={name} was asked for but CUDA is not available (use --device cpu or auto)"
            )
        if name == "cuda":
            return torch.device("cuda", local_rank if local_rank is not None else torch.cuda.current_device())
    return torch.device(name)
