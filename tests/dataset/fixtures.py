"""Builders of tiny dataset trees in each benchmark's real on-disk layout, for tests (any area may use them).

Frames are small uniform-colour JPEGs whose grey level encodes the frame number (``frame_value(i)``), so a
test can check that a reader returns frames in the right order. Every builder takes the exact text of the
annotation files, so tests can put real quirks in them (tabs, CRLF, NaN rows, leading spaces).

Usage from another test package: ``from tests.dataset.fixtures import make_otb_tree``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import cv2
import numpy as np

FRAME_W, FRAME_H = 16, 12


def frame_value(number: int) -> int:
    """Grey level written into the frame with file number ``number`` (1..250 cycle)."""
    return 1 + (7 * number) % 250


def write_jpeg(path: Path, number: int, width: int = FRAME_W, height: int = FRAME_H) -> Path:
    """A (height, width) uniform grey JPEG with value ``frame_value(number)``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = np.full((height, width, 3), frame_value(number), dtype=np.uint8)
    if not cv2.imwrite(str(path), img):
        raise OSError(f"cv2 could not write {path}")
    return path


def write_frames(directory: Path, numbers: Iterable[int], digits: int = 8, ext: str = "jpg") -> list[Path]:
    """Frames ``directory/{n:0{digits}d}.{ext}`` (digits=0: unpadded) for each number."""
    paths = []
    for n in numbers:
        name = f"{n:0{digits}d}.{ext}" if digits else f"{n}.{ext}"
        paths.append(write_jpeg(directory / name, n))
    return paths


def write_text(path: Path, text: str, newline: str = "\n") -> Path:
    """Write ``text`` exactly, with ``\\n`` turned into ``newline`` (e.g. ``\\r\\n`` for CRLF files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def box_lines(boxes: Sequence[Sequence[float]], sep: str = ",", fmt: str = "{:g}") -> str:
    """Rows of boxes as text, one line each, joined by ``sep``, with a trailing newline."""
    return "".join(sep.join(fmt.format(v) for v in box) + "\n" for box in boxes)


def make_folder_sequence(
    root: Path,
    name: str,
    boxes: Sequence[Sequence[float]],
    *,
    absent: Sequence[int] | None = None,
    attributes: dict | None = None,
    digits: int = 4,
    num_frames: int | None = None,
) -> Path:
    """``root/name/{img/0001.jpg.., groundtruth_rect.txt[, absent.label, attributes.json]}``."""
    seq = root / name
    write_frames(seq / "img", range(1, (num_frames or len(boxes)) + 1), digits=digits)
    write_text(seq / "groundtruth_rect.txt", box_lines(boxes))
    if absent is not None:
        write_text(seq / "absent.label", "".join(f"{int(a)}\n" for a in absent))
    if attributes is not None:
        write_text(seq / "attributes.json", json.dumps(attributes))
    return seq


def make_otb_sequence(
    root: Path,
    folder: str,
    gt_texts: dict[str, str],
    frame_numbers: Iterable[int],
    *,
    digits: int = 4,
    ext: str = "jpg",
) -> Path:
    """An OTB folder: ``root/folder/img/{n:04d}.jpg`` for ``frame_numbers`` and the given GT files.

    ``gt_texts`` maps a file name (``groundtruth_rect.txt``, ``groundtruth_rect.1.txt``...) to its text.
    """
    seq = root / folder
    write_frames(seq / "img", frame_numbers, digits=digits, ext=ext)
    for fname, text in gt_texts.items():
        write_text(seq / fname, text)
    return seq


def make_lasot_sequence(
    root: Path,
    name: str,
    gt_text: str,
    num_frames: int,
    *,
    occlusion: Sequence[int] | None = None,
    out_of_view: Sequence[int] | None = None,
    nlp: str = "a thing moving",
) -> Path:
    """``root/<class>/<class>-<k>/`` : ``img/00000001.jpg..``, groundtruth.txt, flags (one line), nlp.txt."""
    cls = name.rsplit("-", 1)[0]
    seq = root / cls / name
    write_frames(seq / "img", range(1, num_frames + 1), digits=8)
    write_text(seq / "groundtruth.txt", gt_text)
    occ = occlusion if occlusion is not None else [0] * num_frames
    oov = out_of_view if out_of_view is not None else [0] * num_frames
    write_text(seq / "full_occlusion.txt", ",".join(str(int(v)) for v in occ))
    write_text(seq / "out_of_view.txt", ",".join(str(int(v)) for v in oov))
    write_text(seq / "nlp.txt", nlp + "\n")
    return seq


def make_got10k_sequence(
    split_dir: Path,
    name: str,
    gt_text: str,
    num_frames: int,
    *,
    absence: Sequence[int] | None = None,
    cover: Sequence[int] | None = None,
    cut_by_image: Sequence[int] | None = None,
    meta: dict[str, str] | None = None,
) -> Path:
    """``split_dir/name/`` with 8-digit frames, groundtruth.txt, label files (when given) and meta_info.ini.

    ``split_dir/list.txt`` is (re)written to list every sequence folder in it.
    """
    seq = split_dir / name
    write_frames(seq, range(1, num_frames + 1), digits=8)
    write_text(seq / "groundtruth.txt", gt_text)
    for fname, values in (("absence", absence), ("cover", cover), ("cut_by_image", cut_by_image)):
        if values is not None:
            write_text(seq / f"{fname}.label", "".join(f"{int(v)}\n" for v in values))
    meta = meta if meta is not None else {"object_class": "cat", "motion_class": "walking"}
    write_text(seq / "meta_info.ini", "[METAINFO]\n" + "".join(f"{k}: {v}\n" for k, v in meta.items()))
    names = sorted(d.name for d in split_dir.iterdir() if d.is_dir())
    write_text(split_dir / "list.txt", "\n".join(names) + "\n")
    return seq


def make_trackingnet_sequence(root: Path, chunk: str, video: str, anno_text: str, num_frames: int) -> Path:
    """``root/chunk/frames/video/0.jpg..`` (zero-based, unpadded) and ``root/chunk/anno/video.txt``."""
    write_frames(root / chunk / "frames" / video, range(num_frames), digits=0)
    write_text(root / chunk / "anno" / f"{video}.txt", anno_text)
    return root / chunk / "frames" / video


def make_uav_sequence(
    root: Path, name: str, folder: str, anno_text: str, frame_numbers: Iterable[int]
) -> Path:
    """``root/data_seq/UAV123/folder/000001.jpg..`` and ``root/anno/UAV123/name.txt``."""
    write_frames(root / "data_seq" / "UAV123" / folder, frame_numbers, digits=6)
    write_text(root / "anno" / "UAV123" / f"{name}.txt", anno_text)
    return root / "data_seq" / "UAV123" / folder


def vatic_line(track: int, xyxy: Sequence[float], frame: int, lost: int = 0, occluded: int = 0) -> str:
    """One NfS/VATIC annotation row: track xmin ymin xmax ymax frame lost occluded generated "label"."""
    x1, y1, x2, y2 = xyxy
    return f'{track} {x1:g} {y1:g} {x2:g} {y2:g} {frame} {lost} {occluded} 0 "object"\n'


def make_nfs_raw_sequence(root: Path, name: str, anno_text: str, num_frames: int) -> Path:
    """As downloaded: ``root/name/30/name/00001.jpg..`` and ``root/name/30/name.txt`` (240 fps rows)."""
    base = root / name / "30"
    write_frames(base / name, range(1, num_frames + 1), digits=5)
    write_text(base / f"{name}.txt", anno_text)
    return base


def make_nfs_packed_sequence(root: Path, name: str, anno_text: str, num_frames: int) -> Path:
    """Repackaged: ``root/sequences/name/00001.jpg..`` and ``root/anno/nfs_name.txt``."""
    write_frames(root / "sequences" / name, range(1, num_frames + 1), digits=5)
    write_text(root / "anno" / f"nfs_{name}.txt", anno_text)
    return root / "sequences" / name


def make_vot_sequence(
    root: Path, name: str, gt_text: str, num_frames: int, *, legacy: bool = False, tags: dict | None = None
) -> Path:
    """``root/name/{sequence, groundtruth.txt, color/00000001.jpg..}``; legacy: frames in the folder root.

    ``root/list.txt`` is (re)written to list every sequence folder.
    """
    seq = root / name
    if legacy:
        write_frames(seq, range(1, num_frames + 1), digits=8)
    else:
        write_frames(seq / "color", range(1, num_frames + 1), digits=8)
        write_text(seq / "sequence", "channels.color=color/%08d.jpg\nfps=30\nformat=default\n")
    write_text(seq / "groundtruth.txt", gt_text)
    for tag, values in (tags or {}).items():
        write_text(seq / f"{tag}.tag", "".join(f"{int(v)}\n" for v in values))
    names = sorted(d.name for d in root.iterdir() if d.is_dir())
    write_text(root / "list.txt", "\n".join(names) + "\n")
    return seq


def make_coco_tree(
    root: Path,
    split: str,
    images: list[dict],
    annotations: list[dict],
    categories: list[dict],
    *,
    version: str = "2017",
) -> Path:
    """``root/annotations/instances_{split}{version}.json`` and ``root/images/{split}{version}/<file_name>``.

    ``images`` entries need ``id``, ``file_name``, ``width``, ``height``; one JPEG is written for each.
    """
    for img in images:
        write_jpeg(
            root / "images" / f"{split}{version}" / img["file_name"], img["id"], img["width"], img["height"]
        )
    data = {"images": images, "annotations": annotations, "categories": categories}
    write_text(root / "annotations" / f"instances_{split}{version}.json", json.dumps(data))
    return root
