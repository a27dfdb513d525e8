"""Evaluate trackers on a list of sequences under one protocol: runs -> per-run scores -> mean over runs.

Multiple runs of a tracker (``param_000``, ``param_001``, ...) are scored separately and the scores, curves
and per-sequence numbers are averaged over runs, as the papers report them.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field

import numpy as np

from eval.curves import curve_scores, mean_curve, pooled_scores, sequence_curves
from eval.frame_errors import FrameErrors, SequenceInput, compute_frame_errors
from eval.protocols import THRESHOLD_SETS, Protocol, ThresholdSet

SCORE_KEYS = ("auc", "op50", "op75", "precision", "norm_precision")
POOLED_KEYS = ("ao", "sr50", "sr75")
SEQUENCE_KEYS = ("auc", "precision", "norm_precision")


@dataclass
class GroundTruth:
    """Ground truth of one sequence, independent of any dataset reader.

    boxes: (N, 4) xywh (NaN unknown); visible: (N,) bool or None; cover: (N,) int or None (GOT-10k);
    image_wh: (width, height) or None; flags: per-sequence attribute flags (attribute name -> bool).
    """

    name: str
    boxes: np.ndarray
    visible: np.ndarray | None = None
    cover: np.ndarray | None = None
    image_wh: tuple[float, float] | None = None
    flags: dict[str, bool] = field(default_factory=dict)


@dataclass
class RunScores:
    """Scores of one run: scores (percent), mean curves (fractions), per-sequence scores (percent)."""

    scores: dict[str, float]
    curves: dict[str, np.ndarray]
    sequences: dict[str, dict[str, float]]
    attributes: dict[str, dict[str, float]]


@dataclass
class TrackerEvaluation:
    """A tracker's numbers averaged over its runs; ``run_scores`` keeps each run's scores."""

    key: str
    scores: dict[str, float]
    curves: dict[str, np.ndarray]
    sequences: dict[str, dict[str, float]]
    attributes: dict[str, dict[str, float]]
    run_scores: list[dict[str, float]]
    thresholds: ThresholdSet


def _summary(
    curves_s: np.ndarray,
    curves_p: np.ndarray,
    curves_n: np.ndarray,
    rows: np.ndarray | None,
    errors: FrameErrors,
    protocol: Protocol,
    thr: ThresholdSet,
) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    sel = slice(None) if rows is None else rows
    succ = mean_curve(curves_s[sel], protocol.drop_zero_sequences)
    prec = mean_curve(curves_p[sel], protocol.drop_zero_sequences)
    norm = mean_curve(curves_n[sel], protocol.drop_zero_sequences)
    scores = curve_scores(succ, prec, norm, thr, protocol)
    if protocol.aggregation == "frame_pooled":
        pooled, succ = pooled_scores(errors, thr, rows)
        scores.update(pooled)
        scores.update(auc=pooled["ao"], op50=pooled["sr50"], op75=pooled["sr75"])
    return scores, {"success": succ, "precision": prec, "norm_precision": norm}


def evaluate_run(
    items: Seq[SequenceInput], protocol: Protocol, flags: Mapping[str, Mapping[str, bool]] | None = None
) -> RunScores:
    """Score one run. items: one :class:`SequenceInput` per sequence; flags: seq name -> attribute flags."""
    thr = THRESHOLD_SETS[protocol.thresholds]
    errors = compute_frame_errors(items, protocol)
    curves = sequence_curves(errors, thr, protocol)
    scores, mean_curves = _summary(
        curves.success, curves.precision, curves.norm_precision, None, errors, protocol, thr
    )
    per_seq: dict[str, dict[str, float]] = {}
    for i, name in enumerate(curves.names):
        s = curve_scores(curves.success[i], curves.precision[i], curves.norm_precision[i], thr, protocol)
        per_seq[name] = {k: s[k] for k in SEQUENCE_KEYS}
        if protocol.aggregation == "frame_pooled":
            per_seq[name]["ao"] = 100.0 * float(curves.avg_overlap[i])
    attributes: dict[str, dict[str, float]] = {}
    if flags:
        names = sorted({a for f in flags.values() for a in f})
        for attr in names:
            rows = np.array([bool(flags.get(n, {}).get(attr, False)) for n in curves.names])
            if rows.any():
                attr_scores, _ = _summary(
                    curves.success, curves.precision, curves.norm_precision, rows, errors, protocol, thr
                )
                attr_scores["num_sequences"] = int(rows.sum())
                attributes[attr] = attr_scores
    return RunScores(scores, mean_curves, per_seq, attributes)


def _mean_dicts(dicts: Seq[Mapping[str, float]]) -> dict[str, float]:
    return {k: float(np.mean([d[k] for d in dicts])) for k in dicts[0]}


def evaluate_tracker(
    key: str,
    runs: Seq[Seq[SequenceInput]],
    protocol: Protocol,
    flags: Mapping[str, Mapping[str, bool]] | None = None,
) -> TrackerEvaluation:
    """Score every run of one tracker and average scores, curves and per-sequence numbers over runs."""
    if not runs:
        raise ValueError(f"{key}: no runs to evaluate")
    per_run = [evaluate_run(items, protocol, flags) for items in runs]
    curves = {k: np.mean([r.curves[k] for r in per_run], axis=0) for k in per_run[0].curves}
    sequences = {name: _mean_dicts([r.sequences[name] for r in per_run]) for name in per_run[0].sequences}
    attributes = {a: _mean_dicts([r.attributes[a] for r in per_run]) for a in per_run[0].attributes}
    return TrackerEvaluation(
        key=key,
        scores=_mean_dicts([r.scores for r in per_run]),
        curves=curves,
        sequences=sequences,
        attributes=attributes,
        run_scores=[r.scores for r in per_run],
        thresholds=THRESHOLD_SETS[protocol.thresholds],
    )


def make_inputs(
    ground_truth: Seq[GroundTruth],
    predictions: Mapping[str, np.ndarray],
    sources: Mapping[str, str] | None = None,
) -> list[SequenceInput]:
    """Pair ground truth with one run's predictions (seq name -> (P, 4) xywh), in ground-truth order."""
    sources = sources or {}
    return [
        SequenceInput(
            name=g.name,
            pred=predictions[g.name],
            gt=g.boxes,
            visible=g.visible,
            cover=g.cover,
            image_wh=g.image_wh,
            source=str(sources.get(g.name, "")),
        )
        for g in ground_truth
    ]
