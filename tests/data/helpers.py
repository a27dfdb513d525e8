"""In-memory sequence datasets with generated frames for the data-pipeline tests (and the benchmark)."""

from __future__ import annotations

import numpy as np

from ltr.dataset.base import Sequence, SequenceDataset

TARGET_COLOR = (250, 20, 20)


def textured_background(height: int, width: int, seed: int) -> np.ndarray:
    """(H, W, 3) uint8 smooth random texture with values in [40, 200] (never the target colour)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(40, 200, size=(height // 8 + 2, width // 8 + 2, 3)).astype(np.float32)
    big = np.repeat(np.repeat(small, 8, axis=0), 8, axis=1)[:height, :width]
    return big.astype(np.uint8)


def draw_box(image: np.ndarray, box_xywh, color=TARGET_COLOR) -> np.ndarray:
    """Fill the pixels whose centres lie inside the xywh box with ``color`` (in place; returns image)."""
    x, y, w, h = box_xywh
    h_img, w_img = image.shape[:2]
    c0, c1 = int(np.clip(np.ceil(x - 0.5), 0, w_img)), int(np.clip(np.ceil(x + w - 0.5), 0, w_img))
    r0, r1 = int(np.clip(np.ceil(y - 0.5), 0, h_img)), int(np.clip(np.ceil(y + h - 0.5), 0, h_img))
    image[r0:r1, c0:c1] = color
    return image


def moving_boxes(num_frames: int, width: int, height: int, seed: int) -> np.ndarray:
    """(N, 4) xywh boxes drifting inside the image."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.1, 0.25) * width
    h = rng.uniform(0.1, 0.25) * height
    t = np.arange(num_frames)
    cx = width / 2 + 0.3 * width * np.sin(t / 17.0 + rng.uniform(0, 6))
    cy = height / 2 + 0.3 * height * np.cos(t / 23.0 + rng.uniform(0, 6))
    return np.stack([cx - w / 2, cy - h / 2, np.full_like(cx, w), np.full_like(cx, h)], axis=1)


class InMemoryDataset(SequenceDataset):
    """Sequences whose frames are drawn on demand: a fixed texture plus a filled target box."""

    def __init__(
        self,
        name: str = "memory",
        *,
        num_sequences: int = 3,
        num_frames: int | list[int] = 40,
        size: tuple[int, int] = (96, 128),
        visible: list[np.ndarray] | None = None,
        is_video: bool = True,
        seed: int = 0,
    ) -> None:
        self.name = name
        self.is_video = is_video
        self.size = size
        self._seqs = {}
        h, w = size
        for k in range(num_sequences):
            n = (num_frames if isinstance(num_frames, int) else num_frames[k]) if is_video else 1
            boxes = moving_boxes(n, w, h, seed + k)
            vis = None if visible is None else visible[k]
            self._seqs[f"{name}_{k}"] = (boxes, vis, seed + k)

    def sequence_names(self) -> list[str]:
        return list(self._seqs)

    def get_sequence(self, name: str) -> Sequence:
        boxes, vis, seed = self._seqs[name]
        h, w = self.size
        background = textured_background(h, w, seed)

        def load(i: int) -> np.ndarray:
            return draw_box(background.copy(), boxes[i])

        return Sequence(name=name, boxes=boxes, frame_loader=load, visible=vis, dataset=self.name)
