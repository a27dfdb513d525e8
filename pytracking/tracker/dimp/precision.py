"""The float precision of the tracker's convolutions on CUDA (``DiMPParams.tf32``)."""

from __future__ import annotations

from contextlib import AbstractContextManager

import torch.backends.cudnn as cudnn

__all__ = ["convolution_precision"]


def convolution_precision(tf32: bool) -> AbstractContextManager:
    """A context in which cuDNN's float32 convolutions use TF32 (``tf32=True``, 10-bit mantissa products) or
    full float32 (``False``); cuDNN's other settings stay as they are. No effect on the CPU.

    Full float32 is the tracker's default: with TF32 a convolution's result depends at the 1e-3 level on
    the batch size and cuDNN's choice of algorithm, and tracking amplifies such differences from frame to
    frame, so the same sequence tracked alone and in a batch (``run_tracker.py --batch``) would diverge.
    """
    return cudnn.flags(
        enabled=cudnn.enabled,
        benchmark=cudnn.benchmark,
        deterministic=cudnn.deterministic,
        allow_tf32=tf32,
    )
