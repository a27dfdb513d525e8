"""A seeded synthetic detection dataset written in the COCO layout (the detection study's embedded default).

Textured shapes of several classes (ellipse, rectangle, triangle, diamond) on textured backgrounds. The
files follow the layout :class:`ltr.dataset.coco.CocoDataset` reads::

    <root>/annotations/instances_<split>2017.json
    <root>/images/<split>2017/<image id>.png

so every COCO code path (pycocotools reader, COCOeval) runs on it unchanged. Annotation boxes are COCO
``bbox`` = xywh in continuous pixels. ``annotation_noise`` > 0 perturbs the *training* annotations in the
rel space (centre by ``noise * w``, log size by ``noise``), mimicking imprecise human labels; the other splits
stay exact.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import cv2
import numpy as np

from ltr.admin.io import atomic_write, atomic_write_text

CLASSES: tuple[str, ...] = ("ellipse", "rectangle", "triangle", "diamond")
SPLITS: tuple[str, ...] = ("train", "val", "test")


@dataclass(frozen=True)
class SyntheticDetectionConfig:
    """Size and content of the generated set (all splits are drawn from one seeded stream per split)."""

    num_train: int = 240
    num_val: int = 100
    num_test: int = 200
    image_size: int = 128
    min_objects: int = 1
    max_objects: int = 3
    min_box: int = 20
    max_box: int = 60
    annotation_noise: float = 0.0
    seed: int = 0

    def count(self, split: str) -> int:
        return {"train": self.num_train, "val": self.num_val, "test": self.num_test}[split]

    def tag(self) -> str:
        """Short hash of the config: the folder name of a generated set."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha1(text.encode()).hexdigest()[:10]


def _texture(rng: np.random.Generator, h: int, w: int, base: np.ndarray, contrast: float) -> np.ndarray:
    """(h, w, 3) float32 texture around colour ``base`` (3,): smooth noise plus stripes."""
    coarse = rng.normal(0.0, 1.0, (max(2, h // 8), max(2, w // 8), 3)).astype(np.float32)
    smooth = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, np.pi)
    period = rng.uniform(4, 14)
    stripes = np.sin((xx * np.cos(angle) + yy * np.sin(angle)) * 2 * np.pi / period)[..., None]
    fine = rng.normal(0.0, 0.04, (h, w, 3)).astype(np.float32)
    tex = base[None, None] + contrast * (0.12 * smooth + 0.1 * stripes) + fine
    return tex.astype(np.float32)


def _shape_mask(kind: str, h: int, w: int, box: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """(h, w) uint8 mask of a shape that fills the xywh ``box`` exactly (touches all four sides)."""
    mask = np.zeros((h, w), np.uint8)
    x, y, bw, bh = box
    shift = 4  # sub-pixel precision for cv2 drawing
    s = 1 << shift

    def pts(p: list[tuple[float, float]]) -> np.ndarray:
        return np.round(np.asarray(p, np.float64) * s).astype(np.int32).reshape(-1, 1, 2)

    x1, y1, x2, y2 = x, y, x + bw - 1, y + bh - 1  # pixel centres inside the box
    if kind == "ellipse":
        centre = (round((x + bw / 2 - 0.5) * s), round((y + bh / 2 - 0.5) * s))
        axes = (round((bw / 2 - 0.5) * s), round((bh / 2 - 0.5) * s))
        cv2.ellipse(mask, centre, axes, 0, 0, 360, 1, -1, cv2.LINE_8, shift)
    elif kind == "rectangle":
        cv2.fillPoly(mask, [pts([(x1, y1), (x2, y1), (x2, y2), (x1, y2)])], 1, cv2.LINE_8, shift)
    elif kind == "triangle":
        apex = x1 + rng.uniform(0.2, 0.8) * (x2 - x1)
        cv2.fillPoly(mask, [pts([(apex, y1), (x2, y2), (x1, y2)])], 1, cv2.LINE_8, shift)
    elif kind == "diamond":
        cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
        cv2.fillPoly(mask, [pts([(cx, y1), (x2, cy), (cx, y2), (x1, cy)])], 1, cv2.LINE_8, shift)
    else:
        raise ValueError(f"unknown shape class {kind!r}; choose one of {CLASSES}")
    return mask


def _tight_box(mask: np.ndarray) -> list[float] | None:
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return [float(xs.min()), float(ys.min()), float(xs.max() - xs.min() + 1), float(ys.max() - ys.min() + 1)]


def render_image(rng: np.random.Generator, cfg: SyntheticDetectionConfig) -> tuple[np.ndarray, list[dict]]:
    """One image (H, W, 3) uint8 RGB and its objects ``[{"bbox": xywh, "category": index into CLASSES}]``.

    Objects are placed without heavy overlap (IoU of their boxes < 0.3); the annotated box is the tight box
    of the visible part of the drawn shape.
    """
    size = cfg.image_size
    image = _texture(rng, size, size, rng.uniform(0.2, 0.8, 3).astype(np.float32), 0.7)
    num = int(rng.integers(cfg.min_objects, cfg.max_objects + 1))
    placed: list[np.ndarray] = []
    masks: list[tuple[np.ndarray, int]] = []
    for _ in range(num * 10):
        if len(placed) == num:
            break
        bw = float(rng.integers(cfg.min_box, cfg.max_box + 1))
        bh = float(np.clip(bw * np.exp(rng.uniform(-0.5, 0.5)), cfg.min_box, cfg.max_box))
        x = float(rng.integers(0, size - int(bw) + 1))
        y = float(rng.integers(0, size - int(bh) + 1))
        box = np.array([x, y, bw, bh])
        if any(_iou_xywh(box, other) > 0.3 for other in placed):
            continue
        placed.append(box)
        kind = int(rng.integers(len(CLASSES)))
        masks.append((_shape_mask(CLASSES[kind], size, size, box, rng), kind))
    visible = np.ones((size, size), bool)
    objects = []
    for mask, kind in reversed(masks):  # later shapes are drawn on top: go front to back for visibility
        tex = _texture(rng, size, size, rng.uniform(0.0, 1.0, 3).astype(np.float32), 1.5)
        draw = (mask > 0) & visible
        image[draw] = tex[draw]
        box = _tight_box(draw.astype(np.uint8))
        visible &= mask == 0
        if box is not None and box[2] >= 4 and box[3] >= 4:
            objects.append({"bbox": box, "category": kind})
    image = cv2.GaussianBlur(image, (3, 3), 0.6)
    return (np.clip(image, 0, 1) * 255).round().astype(np.uint8), objects


def _iou_xywh(a: np.ndarray, b: np.ndarray) -> float:
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / (a[2] * a[3] + b[2] * b[3] - inter)


def _noisy(box: list[float], noise: float, rng: np.random.Generator, size: int) -> list[float]:
    x, y, w, h = box
    cx, cy = x + w / 2 + noise * w * rng.normal(), y + h / 2 + noise * h * rng.normal()
    w2, h2 = w * np.exp(noise * rng.normal()), h * np.exp(noise * rng.normal())
    x1, y1 = max(0.0, cx - w2 / 2), max(0.0, cy - h2 / 2)
    x2, y2 = min(float(size), cx + w2 / 2), min(float(size), cy + h2 / 2)
    return [x1, y1, max(1.0, x2 - x1), max(1.0, y2 - y1)]


def write_split(root: Path, split: str, cfg: SyntheticDetectionConfig) -> Path:
    """Generate and write one split; returns the annotation file. Images first, the JSON last (atomic)."""
    rng = np.random.default_rng([cfg.seed, SPLITS.index(split)])
    noise_rng = np.random.default_rng([cfg.seed, SPLITS.index(split), 1])  # images independent of the noise
    image_dir = root / "images" / f"{split}2017"
    image_dir.mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    ann_id = 1
    for i in range(cfg.count(split)):
        image, objects = render_image(rng, cfg)
        image_id = i + 1
        name = f"{image_id:06d}.png"
        ok, data = cv2.imencode(".png", cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
        if not ok:
            raise RuntimeError(f"PNG encoding failed for {image_dir / name}")
        atomic_write(image_dir / name, lambda f, d=data: f.write(d.tobytes()))
        images.append({"id": image_id, "file_name": name, "width": cfg.image_size, "height": cfg.image_size})
        for obj in objects:
            box = obj["bbox"]
            if split == "train" and cfg.annotation_noise > 0:
                box = _noisy(box, cfg.annotation_noise, noise_rng, cfg.image_size)
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": image_id,
                    "category_id": obj["category"] + 1,
                    "bbox": [round(v, 2) for v in box],
                    "area": round(box[2] * box[3], 2),
                    "iscrowd": 0,
                }
            )
            ann_id += 1
    categories = [{"id": k + 1, "name": name, "supercategory": "shape"} for k, name in enumerate(CLASSES)]
    ann_path = root / "annotations" / f"instances_{split}2017.json"
    payload = {"images": images, "annotations": annotations, "categories": categories}
    atomic_write_text(ann_path, json.dumps(payload))
    return ann_path


def ensure_synthetic(directory: Path, cfg: SyntheticDetectionConfig) -> Path:
    """The root of the generated set for ``cfg`` under ``directory`` (generated on first use, then reused)."""
    root = Path(directory) / f"synthetic_det_{cfg.tag()}"
    marker = root / "config.json"
    if marker.is_file():
        return root
    for split in SPLITS:
        write_split(root, split, cfg)
    atomic_write_text(marker, json.dumps(asdict(cfg), indent=2, sort_keys=True) + "\n")
    return root


def main(argv: list[str] | None = None) -> Path:
    """Write a synthetic detection set in the COCO 2017 layout under ROOT (usable as COCO_DIR).

    ``python -m ltr.detection.synthetic ROOT [--num-train N --num-val N --num-test N --image-size S]``, e.g. to
    exercise the paper settings' code path with ``detector_weights=random``. Returns ROOT.
    """
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m ltr.detection.synthetic", description=main.__doc__.split("\n")[0]
    )
    p.add_argument("root", type=Path, help="output folder (COCO layout)")
    defaults = SyntheticDetectionConfig()
    for name in ("num_train", "num_val", "num_test", "image_size", "seed"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    p.add_argument("--annotation-noise", type=float, default=0.0, help="noise on the train annotations")
    args = p.parse_args(argv)
    cfg = SyntheticDetectionConfig(
        num_train=args.num_train,
        num_val=args.num_val,
        num_test=args.num_test,
        image_size=args.image_size,
        seed=args.seed,
        annotation_noise=args.annotation_noise,
    )
    for split in SPLITS:
        path = write_split(args.root, split, cfg)
        print(f"wrote {cfg.count(split)} images: {path}")
    return args.root


if __name__ == "__main__":
    main()
