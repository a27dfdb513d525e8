"""Count the host reads of device values that a piece of tracker code makes, on any device.

On a GPU every read of a device value on the host (``.item()``, ``.tolist()``, ``if tensor:``, ``int(t)``,
``.cpu()``, a boolean-mask index whose result size depends on the data, ...) waits for the queued work to
finish: the "host synchronisations" that keep a tracker from overlapping its frames' work. CUDA can report
them (``torch.cuda.set_sync_debug_mode``), but a CPU cannot, so this mode records the calls that would be
such reads wherever the code runs, which lets CPU-only tests hold the tracker to its synchronisation budget.

Recorded in ``names``: the functions in :data:`READS`, ``__getitem__`` with a boolean tensor index, and
``index_fill`` / ``index_fill_`` with a tensor value (the kernel takes the value as a host scalar: it reads it).

Recorded in ``uploads``: blocking host-to-device copies, which on CUDA also wait for the stream's queued work
(a copy from pageable memory): ``torch.tensor(..., device=...)``, ``torch.as_tensor(data, device=...)`` of
non-tensor data, ``Tensor.new_tensor``, ``.to(device)`` / ``.cuda()`` without ``non_blocking=True``, and
``tensor[index] = number`` (``__setitem__``: the number is copied in from host memory; seen on an H100). On a CPU
a ``.to(device)`` of a tensor already on the device looks the same and is recorded too: code held to this
budget passes only the dtype when the device cannot change. Not recorded: reads inside compiled extensions.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

#: Tensor methods and functions whose result is host data (or has a data-dependent size).
READS = frozenset(
    {
        "item",
        "tolist",
        "__bool__",
        "__int__",
        "__float__",
        "__index__",
        "numpy",
        "cpu",
        "nonzero",
        "argwhere",
        "masked_select",
        "unique",
        "unique_consecutive",
    }
)


def _names_device(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if kwargs.get("device") is not None:
        return True
    return any(isinstance(a, (torch.device, str)) for a in args[1:])


def _is_upload(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if name == "new_tensor":
        return True
    if name == "tensor":
        return kwargs.get("device") is not None
    if name == "as_tensor":
        return kwargs.get("device") is not None and not isinstance(args[0], torch.Tensor)
    if name == "__setitem__":
        return len(args) >= 3 and not isinstance(args[2], torch.Tensor)
    if name in ("to", "cuda"):
        return not kwargs.get("non_blocking", False) and (name == "cuda" or _names_device(args, kwargs))
    return False


def _tensor_fill_value(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if name not in ("index_fill", "index_fill_"):
        return False
    value = kwargs.get("value", args[-1] if len(args) >= 4 else None)  # (self, dim, index, value)
    return isinstance(value, torch.Tensor)


def _bool_index(args: tuple[Any, ...]) -> bool:
    if len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)


class HostReads(TorchFunctionMode):
    """``with HostReads() as reads: ...`` then ``reads.names``: the reads made, in order (function names), and
    ``reads.uploads``: the blocking host-to-device copies (function names).

    Nested use records into the innermost mode only.
    """

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.uploads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (
            name in READS
            or (name == "__getitem__" and _bool_index(args))
            or _tensor_fill_value(name, args, kwargs)
        ):
            self.names.append(name)
        elif _is_upload(name, args, kwargs):
            self.uploads.append(name)
        return func(*args, **kwargs)
