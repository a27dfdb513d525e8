"""How a tracker's boxes are wrong, frame by frame: overlap, size, aspect ratio and centre, and when the target
is lost.

Success AUC says how much a tracker loses; this report says where: a box that follows the target but is too
big (``log_size`` > 0), one that drifts in shape (``abs_log_aspect``), or one that leaves the target and stays
away (``lost_at``). Boxes are (N, 4) xywh in pixels. Frame 1 (the initialisation), frames whose ground truth is
unknown (NaN, non-positive size) and frames where the target is marked absent are left out.

Per frame (1-based ``frame``):

- ``iou``: overlap with the ground truth (0 for a missing or degenerate prediction);
- ``log_size``: log(sqrt(w h) / sqrt(w_gt h_gt)), > 0 when the box is too large;
- ``log_aspect``: log((w / h) / (w_gt / h_gt)), > 0 when the box is too wide;
- ``aspect``, ``gt_aspect``: w / h of the prediction and the ground truth;
- ``norm_center``: centre distance divided by sqrt(w_gt h_gt).

Per sequence, over its frames: ``mean_iou``; ``found``, the fraction of frames with IoU above ``found_iou``;
and over the found frames only (the box is on the target, so its errors are the box's, not a lost target's):
mean ``log_size``, mean ``abs_log_size``, mean ``abs_log_aspect``, mean ``norm_center``. ``lost_at`` is the
first frame of the first run of at least ``lost_frames`` frames with IoU at or below ``found_iou`` (empty when
there is none).
"""

from __future__ import annotations

from collections.abc import Sequence as Seq

import numpy as np
import pandas as pd

from eval.box_metrics import center_error, iou_xywh
from eval.evaluation import GroundTruth
from eval.result_files import TrackerResults

FRAME_COLUMNS = ("iou", "log_size", "log_aspect", "aspect", "gt_aspect", "norm_center")
SUMMARY_COLUMNS = (
    "frames",
    "mean_iou",
    "found",
    "log_size",
    "abs_log_size",
    "abs_log_aspect",
    "norm_center",
    "lost_at",
)


def frame_box_errors(pred: np.ndarray, gt: GroundTruth) -> pd.DataFrame:
    """Per-frame errors of one sequence's predictions ``pred`` (P, 4) xywh against ``gt``.

    Rows are the frames 2..min(P, N) that have a known, visible target; columns ``frame`` and
    :data:`FRAME_COLUMNS`.
    """
    n = min(len(pred), len(gt.boxes))
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 4)[:n]
    g = np.asarray(gt.boxes, dtype=np.float64).reshape(-1, 4)[:n]
    keep = np.isfinite(g).all(axis=1) & (g[:, 2] > 0) & (g[:, 3] > 0)
    if gt.visible is not None:
        keep &= np.asarray(gt.visible, dtype=bool)[:n]
    keep[:1] = False
    frames = np.flatnonzero(keep)
    p, g = p[frames], g[frames]
    usable = np.isfinite(p).all(axis=1) & (p[:, 2] > 0) & (p[:, 3] > 0)
    iou = np.where(usable, np.nan_to_num(iou_xywh(np.where(usable[:, None], p, g), g)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        size = np.where(usable, np.sqrt(p[:, 2] * p[:, 3]), np.nan)
        aspect = np.where(usable, p[:, 2] / p[:, 3], np.nan)
    gt_size = np.sqrt(g[:, 2] * g[:, 3])
    gt_aspect = g[:, 2] / g[:, 3]
    return pd.DataFrame(
        {
            "frame": frames + 1,
            "iou": iou,
            "log_size": np.log(size / gt_size),
            "log_aspect": np.log(aspect / gt_aspect),
            "aspect": aspect,
            "gt_aspect": gt_aspect,
            "norm_center": np.where(usable, center_error(p, g, offset=0.0) / gt_size, np.nan),
        }
    )


def first_lost_frame(frames: np.ndarray, iou: np.ndarray, found_iou: float, lost_frames: int) -> int | None:
    """First frame of the first run of at least ``lost_frames`` consecutive rows with IoU <= ``found_iou``."""
    if len(iou) < lost_frames:
        return None
    window = np.convolve(np.asarray(iou) <= found_iou, np.ones(lost_frames, dtype=int), mode="valid")
    hits = np.flatnonzero(window == lost_frames)
    return int(frames[hits[0]]) if hits.size else None


def summarize(
    errors: pd.DataFrame, found_iou: float = 0.3, lost_frames: int = 10
) -> dict[str, float | int | None]:
    """One sequence's :data:`SUMMARY_COLUMNS` from its :func:`frame_box_errors` table."""
    found = errors[errors["iou"] > found_iou]
    lost = first_lost_frame(errors["frame"].to_numpy(), errors["iou"].to_numpy(), found_iou, lost_frames)
    return {
        "frames": len(errors),
        "mean_iou": float(errors["iou"].mean()) if len(errors) else float("nan"),
        "found": float((errors["iou"] > found_iou).mean()) if len(errors) else float("nan"),
        "log_size": float(found["log_size"].mean()),
        "abs_log_size": float(found["log_size"].abs().mean()),
        "abs_log_aspect": float(found["log_aspect"].abs().mean()),
        "norm_center": float(found["norm_center"].mean()),
        "lost_at": lost,
    }


def box_error_tables(
    ground_truth: Seq[GroundTruth],
    loaded: Seq[TrackerResults],
    found_iou: float = 0.3,
    lost_frames: int = 10,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-frame table, per-sequence table) over every run of every tracker, on the given sequences.

    Both start with the columns ``tracker``, ``run`` (the run id, empty for a single run) and ``sequence``.
    """
    frames, rows = [], []
    for res in loaded:
        for run_id, run in zip(res.run_ids, res.runs, strict=True):
            for gt in ground_truth:
                errors = frame_box_errors(run[gt.name], gt)
                key = {"tracker": res.key, "run": "" if run_id is None else run_id, "sequence": gt.name}
                frames.append(errors.assign(**key))
                rows.append({**key, **summarize(errors, found_iou, lost_frames)})
    lead = ["tracker", "run", "sequence"]
    per_frame = pd.concat(frames, ignore_index=True)[[*lead, "frame", *FRAME_COLUMNS]]
    per_sequence = pd.DataFrame(rows, columns=[*lead, *SUMMARY_COLUMNS]).astype({"lost_at": "Int64"})
    return per_frame, per_sequence


def tracker_means(per_sequence: pd.DataFrame) -> pd.DataFrame:
    """Mean of each per-sequence column over the sequences and runs of each tracker; instead of ``lost_at``,
    ``lost``: how many sequences were lost, per run."""
    numeric = [c for c in SUMMARY_COLUMNS if c not in ("frames", "lost_at")]
    groups = per_sequence.groupby("tracker", sort=False)
    means = groups[numeric].mean()
    means["lost"] = groups["lost_at"].count() / groups["run"].nunique()
    return means
