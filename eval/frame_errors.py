"""Raw predictions + ground truth -> per-frame IoU / centre errors, following a :class:`Protocol`.

All sequences of one tracker run are concatenated into flat (F, ...) arrays with ``offsets`` (S + 1,), so
every step after the per-sequence length check is one vectorised numpy operation over all frames.
Failures and forced successes are written as sentinels: IoU ``-1`` (fails every threshold), errors ``inf``
(fail) and ``-1`` (success); frames a metric drops have ``counted`` False.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass

import numpy as np

from eval.box_metrics import center_error, clip_to_image, iou_xywh, normalized_center_error
from eval.protocols import Protocol

IOU_FAIL = -1.0
IOU_SUCCESS = np.inf
ERR_FAIL = np.inf
ERR_SUCCESS = -1.0
METRICS = ("iou", "center", "norm_center")


class ResultError(ValueError):
    """A tracker result is unusable under the protocol; the message names the file and line."""


@dataclass
class SequenceInput:
    """One sequence of one tracker run.

    pred: (P, 4) xywh predictions as read (NaN kept); gt: (N, 4) xywh ground truth (NaN = unknown);
    visible: (N,) bool or None; cover: (N,) int GOT-10k cover labels or None; image_wh: (2,) image
    width/height or None; source: the result file, for messages.
    """

    name: str
    pred: np.ndarray
    gt: np.ndarray
    visible: np.ndarray | None = None
    cover: np.ndarray | None = None
    image_wh: tuple[float, float] | None = None
    source: str = ""


@dataclass
class FrameErrors:
    """Per-frame measures of S concatenated sequences (F frames in all).

    values[m]: (F,) measure with sentinels, m in :data:`METRICS`; counted[m]: (F,) bool frame enters the
    numerator; denominator[m]: (F,) bool frame enters the per-sequence denominator; valid: (F,) bool GT valid,
    visible and not dropped; offsets: (S + 1,) int64 sequence starts.
    """

    names: list[str]
    offsets: np.ndarray
    values: dict[str, np.ndarray]
    counted: dict[str, np.ndarray]
    denominator: dict[str, np.ndarray]
    valid: np.ndarray

    @property
    def seq_ids(self) -> np.ndarray:
        """(F,) index of each frame's sequence."""
        return np.repeat(np.arange(len(self.names)), np.diff(self.offsets))


def _where(source: str, name: str) -> str:
    return source or f"result of sequence {name!r}"


def align_lengths(item: SequenceInput, protocol: Protocol) -> tuple[np.ndarray, int, np.ndarray]:
    """Match the prediction length to the GT length -> (pred (n, 4), n, padded (n,) bool).

    ``n`` is the number of frames evaluated (the GT length, or less for ``truncate_gt``).
    """
    pred = np.asarray(item.pred, dtype=np.float64).reshape(-1, 4)
    n_gt = len(item.gt)
    n_pred = len(pred)
    where = _where(item.source, item.name)
    padded = np.zeros(n_gt, dtype=bool)
    if n_pred > n_gt:
        if protocol.longer_prediction == "error":
            raise ResultError(
                f"{where}: has {n_pred} lines but the ground truth of {item.name!r} has {n_gt} frames "
                f"(line {n_gt + 1} onwards is extra; protocol {protocol.name!r} rejects longer results)"
            )
        return pred[:n_gt], n_gt, padded
    if n_pred < n_gt:
        rule = protocol.shorter_prediction
        if rule == "error" or n_pred == 0:
            raise ResultError(
                f"{where}: has {n_pred} lines but the ground truth of {item.name!r} has {n_gt} frames "
                f"(first missing frame: line {n_pred + 1}; protocol {protocol.name!r}"
                f"{' rejects shorter results' if rule == 'error' else ' needs at least one row'})"
            )
        if rule == "truncate_gt":
            return pred, n_pred, padded[:n_pred]
        fill = 0.0 if rule == "pad_zero" else np.nan
        pad = np.full((n_gt - n_pred, 4), fill)
        padded[n_pred:] = True
        return np.concatenate([pred, pad]), n_gt, padded
    return pred, n_gt, padded


def _visibility(item: SequenceInput, protocol: Protocol, n: int) -> np.ndarray:
    if protocol.visibility_source == "cover":
        if item.cover is not None:
            return np.asarray(item.cover)[:n] > 0
        # No cover labels: the sequence's visibility (cover > 0 and not absent) is the closest stand-in.
    if item.visible is None:
        return np.ones(n, dtype=bool)
    return np.asarray(item.visible, dtype=bool)[:n]


def _first_bad_row(mask: np.ndarray, offsets: np.ndarray) -> tuple[int, int]:
    """(sequence index, 0-based row) of the first True in a flat per-frame mask."""
    flat = int(np.flatnonzero(mask)[0])
    seq = int(np.searchsorted(offsets, flat, side="right") - 1)
    return seq, flat - int(offsets[seq])


def compute_frame_errors(items: Seq[SequenceInput], protocol: Protocol) -> FrameErrors:
    """Apply ``protocol`` to the sequences of one tracker run and compute all per-frame measures."""
    if not items:
        raise ValueError("no sequences to evaluate")
    preds, gts, vis, pads, sizes, lengths = [], [], [], [], [], []
    for item in items:
        if len(item.gt) == 0:  # a reader refuses empty annotation files; ground truth built by hand may not
            raise ResultError(f"the ground truth of sequence {item.name!r} has no rows (not even frame 1)")
        pred, n, padded = align_lengths(item, protocol)
        preds.append(pred)
        gts.append(np.asarray(item.gt, dtype=np.float64).reshape(-1, 4)[:n])
        vis.append(_visibility(item, protocol, n))
        pads.append(padded)
        lengths.append(n)
        if protocol.clip_to_image:
            if item.image_wh is None:
                raise ValueError(
                    f"protocol {protocol.name!r} clips boxes to the image: sequence "
                    f"{item.name!r} needs its image size (image_wh)"
                )
            sizes.append(np.broadcast_to(np.asarray(item.image_wh, dtype=np.float64), (n, 2)))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    names = [it.name for it in items]
    pred = np.concatenate(preds)
    gt = np.concatenate(gts)
    visible = np.concatenate(vis)
    padded = np.concatenate(pads)
    first = np.zeros(len(gt), dtype=bool)
    first[offsets[:-1]] = True

    gt_nan = np.isnan(gt).any(axis=1)
    if protocol.nan_gt == "error" and gt_nan.any():
        s, row = _first_bad_row(gt_nan, offsets)
        raise ResultError(
            f"ground truth of sequence {names[s]!r} has NaN at frame {row + 1} (protocol {protocol.name!r} "
            "does not accept unknown GT boxes; use a protocol with nan_gt='invalid')"
        )

    pred = _fix_predictions(pred, gt_nan, first, padded, offsets, items, protocol)
    if protocol.first_frame_gt:
        pred[first] = gt[first]
    if protocol.round_boxes:
        pred = np.round(pred)
        gt = np.round(gt)

    box_p, box_g = pred, gt
    if protocol.clip_to_image:
        image_wh = np.concatenate(sizes)
        box_p, box_g = clip_to_image(pred, image_wh), clip_to_image(gt, image_wh)
    values = {
        "iou": iou_xywh(box_p, box_g, union_eps=protocol.iou_union_eps, clip=protocol.clip_iou),
        "center": center_error(pred, gt, offset=protocol.center_offset),
        "norm_center": normalized_center_error(
            pred, gt, offset=protocol.center_offset, size_floor=protocol.norm_size_floor
        ),
    }

    gt_ok = _gt_valid(gt, protocol) & ~gt_nan if protocol.gt_valid_rule != "any" else np.ones(len(gt), bool)
    invalid = ~gt_ok
    absent = ~visible if protocol.use_visibility else np.zeros(len(gt), dtype=bool)
    dropped_all = first if protocol.exclude_first_frame else np.zeros(len(gt), dtype=bool)

    outcomes = {
        "iou": protocol.invalid_gt_iou,
        "center": protocol.invalid_gt_center,
        "norm_center": protocol.invalid_gt_norm_center,
    }
    counted: dict[str, np.ndarray] = {}
    denominator: dict[str, np.ndarray] = {}
    for metric in METRICS:
        fail, success = (IOU_FAIL, IOU_SUCCESS) if metric == "iou" else (ERR_FAIL, ERR_SUCCESS)
        v = values[metric]
        v[np.isnan(v)] = fail
        keep = ~dropped_all
        for mask, outcome in ((invalid & ~absent, outcomes[metric]), (absent, protocol.absent)):
            if outcome == "fail":
                v[mask] = fail
            elif outcome == "success":
                v[mask] = success
            elif outcome == "drop":
                keep &= ~mask
        counted[metric] = keep
        denominator[metric] = keep & ~invalid & ~absent if protocol.denominator == "valid" else keep
    valid = gt_ok & ~absent & ~dropped_all
    return FrameErrors(names, offsets, values, counted, denominator, valid)


def _gt_valid(gt: np.ndarray, protocol: Protocol) -> np.ndarray:
    rule = protocol.gt_valid_rule
    if rule == "positive_size":
        return (gt[:, 2] > 0) & (gt[:, 3] > 0)
    if rule == "all_positive":
        return (gt > 0).all(axis=1)
    if rule == "finite":
        return np.isfinite(gt).all(axis=1)
    raise ValueError(f"unknown gt_valid_rule {rule!r}")


def _fix_predictions(
    pred: np.ndarray,
    gt_nan: np.ndarray,
    first: np.ndarray,
    padded: np.ndarray,
    offsets: np.ndarray,
    items: Seq[SequenceInput],
    protocol: Protocol,
) -> np.ndarray:
    """Raise on or forward-fill bad rows (NaN / negative size / zero size), never across sequences."""
    real = ~padded
    nan_rows = np.isnan(pred).all(axis=1) if protocol.nan_row == "all" else np.isnan(pred).any(axis=1)
    categories = [
        (nan_rows & real, protocol.nan_prediction, "contains NaN"),
        (
            ((pred[:, 2] < 0) | (pred[:, 3] < 0)) & real,
            protocol.negative_size_prediction,
            "has negative size",
        ),
        (((pred[:, 2] == 0) | (pred[:, 3] == 0)) & real, protocol.zero_size_prediction, "has zero size"),
    ]
    fill = np.zeros(len(pred), dtype=bool)
    for mask, rule, what in categories:
        if rule == "error" and mask.any():
            s, row = _first_bad_row(mask, offsets)
            item = items[s]
            values = ", ".join(f"{v:g}" for v in pred[offsets[s] + row])
            raise ResultError(
                f"{_where(item.source, item.name)}:{row + 1}: predicted box {what} ({values}); protocol "
                f"{protocol.name!r} treats this as an invalid result ({int(mask.sum())} such rows in all)"
            )
        if rule == "previous":
            fill |= mask
    fill &= ~first
    if protocol.fill_requires_known_gt:
        fill &= ~gt_nan
    if not fill.any():
        return pred.copy()
    source = np.where(fill, 0, np.arange(len(pred)))
    np.maximum.accumulate(source, out=source)
    return pred[source]
