"""The short clips of the pytracking golden files, made the same way by the golden script and the tests.

``synthetic_clip``: the first sequence of the embedded synthetic test set. ``photo_clip``: a camera path over
a real photograph that matplotlib ships (``grace_hopper.jpg``): a 320 x 240 window panning and zooming over the
image, so the target (the face) moves and changes scale as in real footage.
"""

from __future__ import annotations

import numpy as np


def synthetic_clip(num_frames: int) -> tuple[list[np.ndarray], np.ndarray]:
    """(frames (H, W, 3) uint8, init box (4,) xywh float64)."""
    from ltr.dataset.synthetic import SyntheticDataset

    dataset = SyntheticDataset(1)
    seq = dataset.get_sequence(dataset.sequence_names()[0])
    assert seq.frame_loader is not None
    frames = [np.ascontiguousarray(seq.frame_loader(i)) for i in range(num_frames)]
    return frames, seq.boxes[0].copy()


def photo_clip(num_frames: int) -> tuple[list[np.ndarray], np.ndarray]:
    """(frames (240, 320, 3) uint8, init box (4,) xywh float64) of a camera path over ``grace_hopper.jpg``."""
    import cv2
    from matplotlib import cbook

    with cbook.get_sample_data("grace_hopper.jpg") as f:
        data = np.frombuffer(f.read(), dtype=np.uint8)
    image = cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)  # (600, 512, 3)
    face = np.array([170.0, 90.0, 170.0, 200.0])  # xywh in the photograph
    frames = []
    box0 = None
    for t in range(num_frames):
        zoom = 1.6 - 0.02 * t  # window side / output side
        cx, cy = 256.0 + 4.0 * t, 240.0 + 2.5 * t
        w, h = 320 * zoom, 240 * zoom
        m = np.array([[1 / zoom, 0, -(cx - w / 2) / zoom], [0, 1 / zoom, -(cy - h / 2) / zoom]])
        frames.append(
            cv2.warpAffine(image, m, (320, 240), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)
        )
        if box0 is None:
            box0 = np.array(
                [
                    (face[0] - (cx - w / 2)) / zoom,
                    (face[1] - (cy - h / 2)) / zoom,
                    face[2] / zoom,
                    face[3] / zoom,
                ]
            )
    assert box0 is not None
    return frames, box0
