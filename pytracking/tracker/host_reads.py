"""Count the host reads of device values that a piece of tracker code makes, on any device.

On a GPU every read of a device value on the host (``.item()``, ``.tolist()``, ``if tensor:``, ``int(t)``,
``.cpu()``, a boolean-mask index whose result size depends on the data, ...) waits for the queued work to
finish: the "host synchronisations" that keep a tracker from overlapping its frames' work. CUDA can report
them (``torch.cuda.set_sync_debug_mode``), but a CPU cannot, so this mode records the calls that would be
such reads wherever the code runs, which lets CPU-only tests hold the tracker to its synchronisation budget.

Recorded: the functions in :data:`READS`, and ``__getitem__`` with a boolean tensor index. Not recorded:
``.to(device)`` copies (they cannot be told apart from host-to-device copies on a CPU) and reads inside
compiled extensions.
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


def _bool_index(args: tuple[Any, ...]) -> bool:
    if len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)


class HostReads(TorchFunctionMode):
    """``with HostReads() as reads: ...`` then ``reads.names``: the reads made, in order (function names).

    Nested use records into the innermost mode only.
    """

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in READS or (name == "__getitem__" and _bool_index(args)):
            self.names.append(name)
        return func(*args, **(kwargs or {}))
