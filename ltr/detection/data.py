"""COCO-format images with their ground-truth boxes, per image (pycocotools).

Layout as :mod:`ltr.dataset.coco`: ``<root>/annotations/instances_<split>2017.json`` and images in
``<root>/images/<split>2017/`` or ``<root>/<split>2017/``. Works for COCO 2017 and the synthetic set.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ltr.dataset.base import DatasetError, read_image_rgb


class CocoImages:
    """Images of one split; ``boxes(i)`` are the non-crowd GT boxes (K, 4) xywh, ``categories(i)`` (K,)."""

    def __init__(self, root: str | Path, split: str, *, version: str = "2017") -> None:
        from pycocotools.coco import COCO

        self.root = Path(root)
        ann_path = self.root / "annotations" / f"instances_{split}{version}.json"
        if not ann_path.is_file():
            raise DatasetError(f"COCO annotation file not found: {ann_path} (set COCO_DIR to the COCO root)")
        image_dir = self.root / "images" / f"{split}{version}"
        self.image_dir = image_dir if image_dir.is_dir() else self.root / f"{split}{version}"
        if not self.image_dir.is_dir():
            raise DatasetError(f"COCO image folder not found: {image_dir}")
        with contextlib.redirect_stdout(io.StringIO()):
            self.coco: Any = COCO(str(ann_path))
        self.image_ids = sorted(self.coco.imgs)
        self.category_ids = sorted(self.coco.cats)

    def __len__(self) -> int:
        return len(self.image_ids)

    def annotations(self, image_id: int) -> list[dict]:
        anns = self.coco.imgToAnns.get(image_id, [])
        return [a for a in anns if not a.get("iscrowd", 0) and a["bbox"][2] > 1 and a["bbox"][3] > 1]

    def boxes(self, image_id: int) -> Tensor:
        """(K, 4) float32 xywh GT boxes (non-crowd, w and h > 1 pixel)."""
        anns = self.annotations(image_id)
        return torch.tensor([a["bbox"] for a in anns], dtype=torch.float32).reshape(-1, 4)

    def categories(self, image_id: int) -> Tensor:
        """(K,) long COCO category ids of :meth:`boxes`."""
        return torch.tensor([a["category_id"] for a in self.annotations(image_id)], dtype=torch.long)

    def image(self, image_id: int) -> Tensor:
        """(3, H, W) float32 RGB in [0, 1]."""
        info = self.coco.imgs[image_id]
        array = read_image_rgb(self.image_dir / info["file_name"])
        return torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1).float().div_(255.0)

    def with_boxes(self) -> list[int]:
        """Image ids that have at least one usable GT box."""
        return [i for i in self.image_ids if self.annotations(i)]
