"""COCO 2017 object instances as one-frame "sequences" (``is_video = False``), read with pycocotools.

Layout: ``<root>/annotations/instances_<split>2017.json`` and images in ``<root>/images/<split>2017/`` (or
``<root>/<split>2017/``). Every annotation with ``iscrowd == 0``, ``w > 0``, ``h > 0`` and
``area > min_area`` becomes a sequence named by its annotation id; its one box is COCO's ``bbox`` (xywh,
0-based continuous pixels). Attributes: class name, supercategory, category/image ids, area, segmentation.
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset


class CocoDataset(SequenceDataset):
    """Non-crowd COCO instances, one frame each; boxes (1, 4) xywh."""

    name = "coco"
    is_video = False

    def __init__(
        self, root: str | os.PathLike, split: str = "train", *, version: str = "2017", min_area: float = 0.0
    ) -> None:
        from pycocotools.coco import COCO

        self.root = Path(root)
        ann_path = self.root / "annotations" / f"instances_{split}{version}.json"
        if not ann_path.is_file():
            raise DatasetError(f"COCO annotation file not found: {ann_path} (set COCO_DIR to the root)")
        self.image_dir = self.root / "images" / f"{split}{version}"
        if not self.image_dir.is_dir():
            self.image_dir = self.root / f"{split}{version}"
        if not self.image_dir.is_dir():
            raise DatasetError(f"COCO image folder not found: {self.root / 'images' / f'{split}{version}'}")
        with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
            try:
                self.coco = COCO(str(ann_path))
            except (ValueError, KeyError, TypeError) as err:
                raise DatasetError(f"{ann_path}: not a COCO instances file ({err})") from err
        self._ids = [
            ann["id"]
            for ann in sorted(self.coco.dataset.get("annotations", []), key=lambda a: a["id"])
            if not ann.get("iscrowd", 0)
            and len(ann.get("bbox", [])) == 4
            and ann["bbox"][2] > 0
            and ann["bbox"][3] > 0
            and ann.get("area", ann["bbox"][2] * ann["bbox"][3]) > min_area
        ]

    def sequence_names(self) -> list[str]:
        return [str(i) for i in self._ids]

    def get_sequence(self, name: str) -> Sequence:
        ann_id = int(name)
        if ann_id not in self.coco.anns:
            raise KeyError(f"no COCO annotation with id {name}")
        ann = self.coco.anns[ann_id]
        img = self.coco.imgs[ann["image_id"]]
        cat = self.coco.cats.get(ann["category_id"], {})
        attributes: dict[str, Any] = {
            "class": cat.get("name"),
            "supercategory": cat.get("supercategory"),
            "category_id": ann["category_id"],
            "image_id": ann["image_id"],
            "image_size": (img.get("width"), img.get("height")),
            "area": ann.get("area"),
            "segmentation": ann.get("segmentation"),
        }
        return Sequence(
            name=name,
            boxes=np.asarray([ann["bbox"]], dtype=np.float64),
            frame_paths=[self.image_dir / img["file_name"]],
            dataset=self.name,
            attributes=attributes,
        )

    def mask(self, name: str) -> np.ndarray:
        """The instance mask of sequence ``name`` as (H, W) uint8 {0, 1}."""
        with warnings.catch_warnings():  # pycocotools' numpy-2 copy-keyword deprecation, not ours
            warnings.simplefilter("ignore", DeprecationWarning)
            return self.coco.annToMask(self.coco.anns[int(name)])


def coco_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> CocoDataset:
    """Registry factory ``coco`` (``COCO_DIR``): split ``train`` (default) or ``val``; option ``min_area``."""
    return CocoDataset(dataset_root("coco", root), split or "train", **options)
