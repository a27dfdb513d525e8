"""COCO evaluation with pycocotools' COCOeval: AP, AP50, AP75 of a results list.

A results list is COCO's result format: ``[{"image_id", "category_id", "bbox": [x, y, w, h], "score"}]``
with xywh boxes in original-image pixels.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ltr.admin.io import atomic_write_text

METRICS = ("AP", "AP50", "AP75")


def to_results(
    image_id: int, boxes_xyxy: Tensor, scores: Tensor, category_ids: list[int]
) -> list[dict[str, Any]]:
    """Detections of one image -> COCO result dicts. boxes_xyxy (K, 4) original pixels, scores (K,)."""
    b = boxes_xyxy.detach().double().cpu().numpy()
    s = scores.detach().double().cpu().numpy()
    if len(category_ids) != len(b) or len(s) != len(b):
        raise ValueError(f"to_results: {len(b)} boxes, {len(s)} scores, {len(category_ids)} categories")
    return [
        {
            "image_id": int(image_id),
            "category_id": int(c),
            "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)],
            "score": float(sc),
        }
        for (x1, y1, x2, y2), sc, c in zip(b, s, category_ids, strict=True)
    ]


def evaluate(
    coco_gt: Any, results: list[dict[str, Any]], image_ids: list[int] | None = None
) -> dict[str, float]:
    """COCOeval (bbox) of ``results`` against ``coco_gt`` (a pycocotools COCO) -> {"AP", "AP50", "AP75"} in %.

    ``image_ids`` restricts the evaluation (default: all images of ``coco_gt``). No detections at all
    gives AP = 0 (pycocotools cannot load an empty result list).
    """
    from pycocotools.cocoeval import COCOeval

    if not results:
        return {m: 0.0 for m in METRICS}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
        coco_dt = coco_gt.loadRes(copy.deepcopy(results))
        ev = COCOeval(coco_gt, coco_dt, "bbox")
        if image_ids is not None:
            ev.params.imgIds = sorted(image_ids)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    stats = np.maximum(ev.stats[:3], 0.0)  # -1 means "no ground truth"; report 0
    return {m: float(100.0 * v) for m, v in zip(METRICS, stats, strict=True)}


def markdown_table(rows: dict[str, dict[str, float]], columns: tuple[str, ...] = METRICS) -> str:
    """{row name: {metric: value}} -> a markdown table with one row per name."""
    lines = ["| | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for name, vals in rows.items():
        lines.append(f"| {name} | " + " | ".join(f"{vals[c]:.2f}" for c in columns) + " |")
    return "\n".join(lines) + "\n"


def write_report(directory: Path, payload: dict[str, Any], table: str, stem: str = "results") -> Path:
    """Write ``<stem>.json`` and ``<stem>.md`` atomically into ``directory``; returns the JSON path."""
    directory = Path(directory)
    atomic_write_text(directory / f"{stem}.md", table)
    return atomic_write_text(directory / f"{stem}.json", json.dumps(payload, indent=2, sort_keys=True) + "\n")
