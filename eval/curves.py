"""Per-sequence success / precision curves and the scores derived from them, without per-frame loops.

Counting uses one ``searchsorted`` per frame (how many thresholds a frame passes) and one ``bincount`` per
run (a (sequences x thresholds+1) histogram), so the cost is O(F log T) for F frames and T thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eval.frame_errors import FrameErrors
from eval.protocols import Protocol, ThresholdSet

#: MATLAB's eps, used by the OTB/LaSOT toolkits to drop all-zero sequence curves.
MATLAB_EPS = float(np.finfo(np.float64).eps)


def _histogram(index: np.ndarray, seq_ids: np.ndarray, weights: np.ndarray, n_seq: int, n_bins: int):
    flat = seq_ids * n_bins + index
    return np.bincount(flat, weights=weights, minlength=n_seq * n_bins).reshape(n_seq, n_bins)


def success_counts(
    iou: np.ndarray,
    seq_ids: np.ndarray,
    counted: np.ndarray,
    n_seq: int,
    thresholds: np.ndarray,
    *,
    inclusive: bool = False,
) -> np.ndarray:
    """(S, T) number of counted frames per sequence with IoU > t (or >= t when ``inclusive``).

    iou: (F,) without NaN; seq_ids: (F,) int; counted: (F,) bool; thresholds: (T,) ascending.
    """
    passed = np.searchsorted(thresholds, iou, side="right" if inclusive else "left")
    hist = _histogram(passed, seq_ids, counted.astype(np.float64), n_seq, len(thresholds) + 1)
    # frames passing threshold j are those with passed > j.
    tail = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]
    return tail[:, 1:]


def precision_counts(
    err: np.ndarray, seq_ids: np.ndarray, counted: np.ndarray, n_seq: int, thresholds: np.ndarray
) -> np.ndarray:
    """(S, T) number of counted frames per sequence with error <= t. err: (F,) without NaN."""
    below = np.searchsorted(thresholds, err, side="left")  # thresholds strictly below err
    hist = _histogram(below, seq_ids, counted.astype(np.float64), n_seq, len(thresholds) + 1)
    return np.cumsum(hist, axis=1)[:, :-1]


@dataclass
class SequenceCurves:
    """Per-sequence curves of one tracker run: success (S, T_iou), precision (S, T_px), norm_precision
    (S, T_norm) as fractions in [0, 1]; avg_overlap (S,) mean IoU over valid frames (NaN if none)."""

    names: list[str]
    success: np.ndarray
    precision: np.ndarray
    norm_precision: np.ndarray
    avg_overlap: np.ndarray


def sequence_curves(errors: FrameErrors, thresholds: ThresholdSet, protocol: Protocol) -> SequenceCurves:
    """Success / precision / normalised-precision curves of every sequence in ``errors``."""
    ids = errors.seq_ids
    n = len(errors.names)

    def rate(counts: np.ndarray, metric: str) -> np.ndarray:
        denom = np.bincount(ids, weights=errors.denominator[metric], minlength=n)
        empty = denom <= 0
        if empty.any():
            bad = [errors.names[i] for i in np.flatnonzero(empty)[:5]]
            raise ValueError(
                f"no frames left to evaluate ({metric}) in sequence(s) {bad} under protocol "
                f"{protocol.name!r} (all frames invalid, absent or dropped)"
            )
        return counts / denom[:, None]

    success = rate(
        success_counts(
            errors.values["iou"],
            ids,
            errors.counted["iou"],
            n,
            thresholds.overlap,
            inclusive=protocol.success_inclusive,
        ),
        "iou",
    )
    precision = rate(
        precision_counts(errors.values["center"], ids, errors.counted["center"], n, thresholds.center),
        "center",
    )
    norm = rate(
        precision_counts(
            errors.values["norm_center"], ids, errors.counted["norm_center"], n, thresholds.norm_center
        ),
        "norm_center",
    )
    w = errors.valid.astype(np.float64)
    iou = np.clip(errors.values["iou"], 0.0, 1.0)  # sentinels (-1 fail) add 0
    iou_sum = np.bincount(ids, weights=np.where(errors.valid, iou, 0.0), minlength=n)
    n_valid = np.bincount(ids, weights=w, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg_overlap = iou_sum / n_valid
    return SequenceCurves(list(errors.names), success, precision, norm, avg_overlap)


def threshold_index(thresholds: np.ndarray, value: float) -> int:
    """Index of ``value`` in a threshold array (closest match, must be within 1e-9)."""
    idx = int(np.argmin(np.abs(thresholds - value)))
    if abs(thresholds[idx] - value) > 1e-9:
        raise ValueError(f"threshold {value} is not in the threshold set {thresholds.tolist()}")
    return idx


def mean_curve(curves: np.ndarray, drop_zero: bool) -> np.ndarray:
    """Average (S, T) per-sequence curves; with ``drop_zero`` rows summing to <= eps are left out first."""
    if drop_zero:
        curves = curves[curves.sum(axis=1) > MATLAB_EPS]
        if len(curves) == 0:
            return np.zeros(curves.shape[1])
    return curves.mean(axis=0)


def trapezoid_score(curve: np.ndarray) -> float:
    """TrackingNet score: ``np.trapz(curve, x=linspace(0, 1, T))`` (fraction)."""
    return float(np.trapezoid(curve, x=np.linspace(0.0, 1.0, len(curve))))


def _curve_score(curve: np.ndarray, rule: str, thresholds: np.ndarray, at: float) -> float:
    if rule == "at_threshold":
        return float(curve[threshold_index(thresholds, at)])
    if rule == "area":
        return float(curve.mean())
    if rule == "trapezoid":
        return trapezoid_score(curve)
    raise ValueError(f"unknown score rule {rule!r}")


def curve_scores(
    success: np.ndarray,
    precision: np.ndarray,
    norm_precision: np.ndarray,
    thresholds: ThresholdSet,
    protocol: Protocol,
) -> dict[str, float]:
    """Scores in percent from mean curves (T,): auc, op50, op75, precision, norm_precision."""
    auc = success.mean() if protocol.success_score == "mean" else trapezoid_score(success)
    return {
        "auc": 100.0 * float(auc),
        "op50": 100.0 * float(success[threshold_index(thresholds.overlap, 0.5)]),
        "op75": 100.0 * float(success[threshold_index(thresholds.overlap, 0.75)]),
        "precision": 100.0
        * _curve_score(precision, protocol.precision_score, thresholds.center, thresholds.center_at),
        "norm_precision": 100.0
        * _curve_score(
            norm_precision, protocol.norm_precision_score, thresholds.norm_center, thresholds.norm_center_at
        ),
    }


def pooled_scores(errors: FrameErrors, thresholds: ThresholdSet, subset: np.ndarray | None = None):
    """GOT-10k scores over all counted frames pooled (frame-weighted) -> (scores in percent, curve (T,)).

    ``subset``: optional (S,) bool selecting sequences. IoU sentinels / NaN contribute 0 to AO.
    """
    mask = errors.counted["iou"].copy()
    if subset is not None:
        mask &= subset[errors.seq_ids]
    iou = np.clip(errors.values["iou"][mask], 0.0, 1.0)
    if iou.size == 0:
        raise ValueError("no frames left to evaluate (all excluded by the protocol)")
    passed = np.searchsorted(thresholds.overlap, iou, side="left")
    hist = np.bincount(passed, minlength=len(thresholds.overlap) + 1)
    curve = np.cumsum(hist[::-1])[::-1][1:] / iou.size
    scores = {
        "ao": 100.0 * float(iou.mean()),
        "sr50": 100.0 * float((iou > 0.5).mean()),
        "sr75": 100.0 * float((iou > 0.75).mean()),
    }
    return scores, curve
