"""Small training-set trees (LaSOT, GOT-10k, TrackingNet, COCO 2014) on which both samplers draw.

``scripts/pytracking_golden.py super_dimp_setting`` runs pytracking's SuperDiMP setting with its datasets on
these trees and records its sampler's draws; ``tests/data/test_sampler_parity.py`` builds the same trees and
draws with this toolkit's sampler. Everything is a pure function of the constants below (no randomness), so
both sides read byte-identical files.

The sequences exercise the sampler's rules: occlusion, out-of-view, absence, ``cover == 0`` and zero-size
boxes make frames invisible; some videos are too short (< 20 frames) or have too few visible frames (<= 12)
and must never be drawn; one LaSOT video has a 247-frame invisible stretch, so the frame gap has to grow; a
500-frame video shows the gap limit of 200 frames; GOT-10k sequences outside the split, a TrackingNet chunk
outside 0-3 and a crowd COCO annotation must never be drawn.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tests.dataset.fixtures import (
    box_lines,
    make_coco_tree,
    make_got10k_sequence,
    make_lasot_sequence,
    make_trackingnet_sequence,
    write_text,
)

LASOT_CLASS = "airplane"
#: the class's videos in LaSOT's training split (its test videos are 1, 9, 13 and 15)
LASOT_TRAIN_VIDEOS = (2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14, 16, 17, 18, 19, 20)
GOT10K_NAMES = tuple(f"GOT-10k_Train_{i:06d}" for i in range(1, 7))
#: 0-based indices into ``train/list.txt``, pytracking's split-file convention
GOT10K_VOTTRAIN = (0, 1, 3, 4)
GOT10K_VOTVAL = (2, 5)
COCO_VERSION = "2014"


@dataclass(frozen=True)
class FixtureRoots:
    """Dataset roots (this toolkit's convention; pytracking's GOT-10k root is ``got10k / "train"``) and the
    GOT-10k split files."""

    lasot: Path
    got10k: Path
    trackingnet: Path
    coco: Path
    got10k_vottrain: Path
    got10k_votval: Path


def _spans(n: int, spans: Iterable[tuple[int, int]]) -> list[int]:
    flags = [0] * n
    for lo, hi in spans:
        for i in range(lo, hi):
            flags[i] = 1
    return flags


def _boxes(n: int, zero: Iterable[int] = ()) -> str:
    zero = set(zero)
    return box_lines([(4, 3, 0, 5) if i in zero else (4 + i % 3, 3, 6, 5) for i in range(n)])


def _lasot(root: Path) -> None:
    special = {
        # video: (frames, occluded spans, out-of-view spans, zero-width rows)
        2: (60, [(10, 15)], [(30, 34)], [45]),
        3: (260, [(3, 250)], [], []),  # visible 0-2 and 250-259: a quarter of the first tries fail
        4: (25, [(12, 25)], [], []),  # 12 visible frames: never drawn
        5: (19, [], [], []),  # 19 frames: never drawn
        6: (500, [], [], []),  # the 200-frame gap limit
        7: (20, [(0, 7)], [], []),  # 13 visible of 20: drawn
    }
    for k in LASOT_TRAIN_VIDEOS:
        n, occ, oov, zero = special.get(k, (20 + 4 * (k % 5), [], [], []))
        make_lasot_sequence(
            root,
            f"{LASOT_CLASS}-{k}",
            _boxes(n, zero),
            n,
            occlusion=_spans(n, occ),
            out_of_view=_spans(n, oov),
        )


def _got10k(root: Path) -> None:
    specs = {
        # index: (frames, absent spans, cover-0 spans)
        0: (40, [(5, 10)], [(15, 18)]),
        1: (220, [], []),
        2: (30, [], []),  # votval
        3: (20, [(0, 7)], []),  # 13 visible of 20: drawn
        4: (20, [(0, 8)], []),  # 12 visible: never drawn
        5: (25, [], []),  # votval
    }
    for index, name in enumerate(GOT10K_NAMES):
        n, absent, cover0 = specs[index]
        covered = _spans(n, cover0)
        make_got10k_sequence(
            root / "train",
            name,
            box_lines([(2.5 + i % 4, 1.5, 7.25, 6.5) for i in range(n)]),
            n,
            absence=_spans(n, absent),
            cover=[0 if covered[i] else 1 + i % 8 for i in range(n)],
            cut_by_image=[0] * n,
            meta={
                "url": "none",
                "begin frame": "0",
                "end frame": str(n),
                "anno fps": "10Hz",
                "object_class": "plane",
                "motion_class": "flying",
                "major_class": "aircraft",
                "root_class": "object",
                "motion_adverb": "slowly",
                "resolution": "(16, 12)",
            },
        )


def _trackingnet(root: Path) -> None:
    videos = {
        # video: (chunk, frames, zero-box rows)
        "vid_a": (0, 40, range(10, 13)),
        "vid_b": (0, 25, ()),
        "vid_c": (1, 30, ()),
        "vid_d": (2, 22, range(0, 10)),  # 12 visible: never drawn
        "vid_e": (3, 50, ()),
        "vid_f": (4, 30, ()),  # chunk 4: not in the setting's chunks 0-3
    }
    for video, (chunk, n, zero) in videos.items():
        zero = set(zero)
        rows = [
            (0.0, 0.0, 0.0, 0.0) if i in zero else (3.25 + 0.5 * (i % 3), 2.75, 6.5, 5.25) for i in range(n)
        ]
        make_trackingnet_sequence(root, f"TRAIN_{chunk}", video, box_lines(rows, fmt="{:.2f}"), n)


def _coco(root: Path) -> None:
    images = [
        {"id": 11, "file_name": "COCO_train2014_000000000011.jpg", "width": 16, "height": 12},
        {"id": 12, "file_name": "COCO_train2014_000000000012.jpg", "width": 20, "height": 14},
        {"id": 13, "file_name": "COCO_train2014_000000000013.jpg", "width": 12, "height": 12},
    ]

    def ann(ann_id: int, image_id: int, box: tuple[float, float, float, float], crowd: int = 0) -> dict:
        x, y, w, h = box
        polygon = [x, y, x + w, y, x + w, y + h, x, y + h]
        return {
            "id": ann_id,
            "image_id": image_id,
            "category_id": 1,
            "bbox": list(box),
            "area": w * h,
            "iscrowd": crowd,
            "segmentation": [polygon],
        }

    annotations = [
        ann(101, 11, (2.0, 2.0, 6.0, 5.0)),
        ann(102, 11, (8.0, 3.0, 5.0, 6.0)),
        ann(103, 12, (1.5, 2.5, 9.0, 7.0)),
        ann(104, 12, (4.0, 4.0, 3.0, 3.0), crowd=1),  # crowd: never drawn
        ann(105, 13, (3.0, 3.0, 6.0, 6.0)),
        ann(106, 13, (0.5, 0.5, 4.0, 4.0)),
    ]
    categories = [{"id": 1, "name": "airplane", "supercategory": "vehicle"}]
    make_coco_tree(root, "train", images, annotations, categories, version=COCO_VERSION)


def build_fixture(base: Path) -> FixtureRoots:
    """Write the four trees and the GOT-10k split files under ``base``; returns their paths."""
    roots = FixtureRoots(
        lasot=base / "lasot",
        got10k=base / "got10k",
        trackingnet=base / "trackingnet",
        coco=base / "coco",
        got10k_vottrain=base / "got10k_vottrain_split.txt",
        got10k_votval=base / "got10k_votval_split.txt",
    )
    _lasot(roots.lasot)
    _got10k(roots.got10k)
    _trackingnet(roots.trackingnet)
    _coco(roots.coco)
    write_text(roots.got10k_vottrain, "".join(f"{i}\n" for i in GOT10K_VOTTRAIN))
    write_text(roots.got10k_votval, "".join(f"{i}\n" for i in GOT10K_VOTVAL))
    return roots
