"""Large CPU tensors reused from malloc's heap instead of mapped afresh from the OS on every allocation.

glibc's malloc gives each block above its mmap threshold (which it raises by itself to at most 32 MiB) a new
mapping from the OS and unmaps it when the block is freed. A batch of crops makes activations of tens to
hundreds of MiB each, so every forward pass page-faults and zero-fills them again: the cost grows with the
batch, and batching on the CPU loses what it should gain. :func:`reuse_freed_memory` raises the threshold
and stops malloc from returning freed memory, so the next forward pass reuses the same pages. The process
then keeps its peak memory until it exits. The tracking commands call it at their start (and the runner's
worker processes when their parent did); ``benchmarks/cpu_memory.py`` measures it.
"""

from __future__ import annotations

import ctypes
import sys

__all__ = ["reuse_freed_memory", "reusing_freed_memory"]

# mallopt's parameters, from glibc's <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_INT_MAX = 2**31 - 1
#: bytes up to which blocks come from the heap: a batch of crops' largest activations, within mallopt's int
LARGEST = 2**30

_ON = [False]


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (it has ``gnu_get_libc_version`` and ``mallopt``), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc


def reuse_freed_memory() -> bool:
    """Serve allocations of up to :data:`LARGEST` bytes from malloc's heap and keep freed memory in the
    process for reuse (module docstring). Returns whether the C library took both settings: False off glibc
    (macOS, Windows, musl), where nothing changes. Process-wide, for the process's lifetime."""
    libc = _glibc()
    if libc is None:
        return False
    taken = libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(LARGEST)) == 1
    taken = libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(_INT_MAX)) == 1 and taken
    _ON[0] = _ON[0] or taken
    return taken


def reusing_freed_memory() -> bool:
    """Whether :func:`reuse_freed_memory` took effect in this process."""
    return _ON[0]
