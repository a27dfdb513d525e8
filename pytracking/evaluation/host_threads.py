"""How many CPU threads torch gets while trackers run on a GPU."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ltr.admin.device import resolve_device

#: torch's intra-op threads in a process whose trackers run on a CUDA device. The host there only launches
#: kernels, copies frames and does small arithmetic; more threads fight the frame readers for the cores and
#: slow every step (measured in docs/results/2026-11-26-batched-sequences.md, the H100's third sitting).
CUDA_HOST_THREADS = 1


@contextmanager
def host_threads(device: str | torch.device) -> Iterator[None]:
    """Run the block with :data:`CUDA_HOST_THREADS` intra-op threads when ``device`` (``auto`` resolved as the
    trackers resolve it) is a CUDA device, torch's setting restored afterwards; CPU trackers keep the process's
    threads. The setting is process-wide: other threads of the process see it while the block runs."""
    if resolve_device(device).type != "cuda":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(CUDA_HOST_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)
