"""OTB-100 (Wu et al., TPAMI 2015): 100 targets in 98 folders.

Layout: ``<root>/<Folder>/img/0001.jpg..`` (4 digits; Board 5) and ``groundtruth_rect.txt`` (comma for most
files, tab/space for others; detected per line). Jogging and Skating2 hold two targets in
``groundtruth_rect.1.txt``/``.2.txt`` (named ``Jogging_1``/``Jogging_2``...); Human4 uses only ``.2``
(``Human4_2``). Frame numbers equal image file numbers; frame ``start + i`` <-> GT row ``i``:

- David starts at image 300, BlurCar1 at 247, BlurCar3 at 3, BlurCar4 at 18;
- Football1, Freeman3, Freeman4 and Diving folders hold extra images past the annotated range (ignored);
- Tiger1: the OTB protocol (``initOmit``) skips its first 5 frames and GT rows; ``tiger1_init_omit=False``
  keeps them (as the got10k and VOT toolkits do).

Boxes are xywh in OTB's 1-based pixel coordinates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset
from ltr.dataset.common import build_sequence
from ltr.dataset.textio import numbered_paths, read_rows

_SINGLE = (
    "Basketball Biker Bird1 Bird2 BlurBody BlurCar1 BlurCar2 BlurCar3 BlurCar4 BlurFace BlurOwl Board Bolt "
    "Bolt2 Box Boy Car1 Car2 Car24 Car4 CarDark CarScale ClifBar Coke Couple Coupon Crossing Crowds Dancer "
    "Dancer2 David David2 David3 Deer Diving Dog Dog1 Doll DragonBaby Dudek FaceOcc1 FaceOcc2 Fish FleetFace "
    "Football Football1 Freeman1 Freeman3 Freeman4 Girl Girl2 Gym Human2 Human3 Human5 Human6 Human7 Human8 "
    "Human9 Ironman Jump Jumping KiteSurf Lemming Liquor Man Matrix Mhyang MotorRolling MountainBike Panda "
    "RedTeam Rubik Shaking Singer1 Singer2 Skater Skater2 Skating1 Skiing Soccer Subway Surfer Suv Sylvester "
    "Tiger1 Tiger2 Toy Trans Trellis Twinnings Vase Walking Walking2 Woman"
).split()

#: sequence name -> (folder, annotation file), for all 100 targets, in alphabetical order.
OTB_SEQUENCES: dict[str, tuple[str, str]] = dict(
    sorted(
        [(name, (name, "groundtruth_rect.txt")) for name in _SINGLE]
        + [
            (f"{folder}_{k}", (folder, f"groundtruth_rect.{k}.txt"))
            for folder in ("Jogging", "Skating2")
            for k in (1, 2)
        ]
        + [("Human4_2", ("Human4", "groundtruth_rect.2.txt"))],
        key=lambda item: item[0].lower(),
    )
)

#: Annotated frame ranges (first, last image number) where they are not 1..rows.
OTB_RANGES: dict[str, tuple[int, int]] = {
    "David": (300, 770),
    "BlurCar1": (247, 988),
    "BlurCar3": (3, 359),
    "BlurCar4": (18, 397),
    "Football1": (1, 74),
    "Freeman3": (1, 460),
    "Freeman4": (1, 283),
    "Diving": (1, 215),
    "Tiger1": (1, 354),
}
OTB_DIGITS = {"Board": 5}
OTB_INIT_OMIT = {"Tiger1": 5}


class OTBDataset(SequenceDataset):
    """The 100 OTB-2015 targets; boxes (N, 4) xywh, 1-based pixels."""

    name = "otb"

    def __init__(self, root: str | os.PathLike, *, tiger1_init_omit: bool = True) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise DatasetError(f"OTB root {self.root} is not a directory (set OTB_DIR)")
        self.init_omit = dict(OTB_INIT_OMIT) if tiger1_init_omit else {}

    def sequence_names(self) -> list[str]:
        return list(OTB_SEQUENCES)

    def get_sequence(self, name: str) -> Sequence:
        if name not in OTB_SEQUENCES:
            raise KeyError(f"no OTB-100 sequence {name!r}")
        folder, gt_file = OTB_SEQUENCES[name]
        gt_path = self.root / folder / gt_file
        boxes = read_rows(gt_path, 4)
        first, count = 1, len(boxes)
        problems: list[str] = []
        if folder in OTB_RANGES:
            first, last = OTB_RANGES[folder]
            count = last - first + 1
            if len(boxes) < count:
                raise DatasetError(f"{gt_path}: {len(boxes)} rows but frames {first}-{last} need {count}")
            if len(boxes) > count:
                problems.append(f"{gt_path}: {len(boxes)} rows for frames {first}-{last}; extra rows ignored")
                boxes = boxes[:count]
        elif (self.root / folder / "img").is_dir():
            num_images = sum(1 for p in (self.root / folder / "img").iterdir() if p.suffix.lower() == ".jpg")
            if num_images != count:
                problems.append(
                    f"{gt_path}: {count} rows but {num_images} images in {self.root / folder / 'img'}"
                )
        omit = self.init_omit.get(folder, 0)
        frames = numbered_paths(
            self.root / folder / "img", first + omit, count - omit, OTB_DIGITS.get(folder, 4), "jpg"
        )
        attributes: dict[str, Any] = {"folder": folder, "first_frame_number": first + omit}
        return build_sequence(
            name, boxes[omit:], frames, dataset=self.name, attributes=attributes, problems=problems
        )


def otb_dataset(
    root: str | os.PathLike | None = None, split: str | None = None, **options: Any
) -> OTBDataset:
    """Registry factory ``otb`` (``OTB_DIR``); option ``tiger1_init_omit`` (default True)."""
    if split not in (None, "", "test", "otb100"):
        raise DatasetError(f"OTB has only the OTB-100 set (got split={split!r})")
    return OTBDataset(dataset_root("otb", root), **options)
