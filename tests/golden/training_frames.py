"""Frames of the training-processing golden file, made the same way by the golden script and its test.

A frame is a window ``(x0, y0, width, height)`` (whole pixels, inside the image) of the photograph that
matplotlib ships (``grace_hopper.jpg``, 600 x 512 RGB): real texture, any frame size, nothing to store but
the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np


@cache
def photograph() -> np.ndarray:
    """The (600, 512, 3) uint8 RGB photograph (read-only)."""
    import cv2
    from matplotlib import cbook

    with cbook.get_sample_data("grace_hopper.jpg") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    image = cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    image.setflags(write=False)
    return image


def window_frames(windows: Sequence[Sequence[int]]) -> list[np.ndarray]:
    """One contiguous (height, width, 3) uint8 frame per window ``(x0, y0, width, height)``."""
    image = photograph()
    frames = []
    for x0, y0, width, height in (tuple(int(v) for v in w) for w in windows):
        if x0 < 0 or y0 < 0 or x0 + width > image.shape[1] or y0 + height > image.shape[0]:
            raise ValueError(
                f"window {(x0, y0, width, height)} leaves the {image.shape[1]}x{image.shape[0]} photo"
            )
        frames.append(np.ascontiguousarray(image[y0 : y0 + height, x0 : x0 + width]))
    return frames
