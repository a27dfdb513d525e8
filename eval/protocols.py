"""Evaluation protocols: every convention of every official toolkit as a named option, in one place.

A :class:`Protocol` says how raw predictions and ground truth become per-frame errors (first-frame handling,
bad rows, length mismatches, invalid / absent frames, box geometry), which thresholds the curves use and how
curves become scores. :data:`DATASET_PROTOCOLS` is the ONE mapping from dataset names to their default
protocol; the metric code itself never looks at dataset names. See docs/evaluation.md for the sources.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

import numpy as np

from ltr.admin.registry import Registry

#: What happens to a frame of some category for one metric: ``fail`` (never a success), ``success``
#: (always a success), ``drop`` (removed from numerator and denominator), ``score`` (computed as usual).
Outcome = Literal["fail", "success", "drop", "score"]


@dataclass(frozen=True)
class Protocol:
    """All conventions of one toolkit. Field docs give the choices; defaults are pytracking's.

    Boxes are xywh throughout. Frame categories are decided on the ground truth: *invalid* (the GT box fails
    ``gt_valid_rule``) and *absent* (the dataset's visibility flag is False while ``use_visibility``).
    """

    name: str
    description: str = ""
    # --- prediction fixes, applied in this order: bad rows -> lengths -> first frame -> rounding ---
    #: NaN anywhere in a predicted row: raise an error / copy the previous (fixed) row / keep (NaN fails).
    nan_prediction: Literal["error", "previous", "score"] = "error"
    #: which rows count as NaN rows: any NaN value (LaSOT toolkit, pytracking) or all four NaN (OTB MATLAB's
    #: vector ``if``); other NaN values are scored as they are (failures).
    nan_row: Literal["any", "all"] = "any"
    #: predicted w < 0 or h < 0.
    negative_size_prediction: Literal["error", "previous", "score"] = "error"
    #: predicted w == 0 or h == 0.
    zero_size_prediction: Literal["previous", "score"] = "previous"
    #: the previous-row copy only happens where the GT row has no NaN (OTB/LaSOT MATLAB and pytracking).
    fill_requires_known_gt: bool = True
    #: more prediction rows than GT rows.
    longer_prediction: Literal["error", "truncate"] = "truncate"
    #: fewer rows: error / pad with zero boxes / pad with NaN boxes (fail) / truncate the GT too.
    shorter_prediction: Literal["error", "pad_zero", "pad_nan", "truncate_gt"] = "pad_zero"
    #: replace the first predicted row by the GT box (counted as a perfect frame).
    first_frame_gt: bool = True
    #: drop the first frame from every metric (GOT-10k).
    exclude_first_frame: bool = False
    #: round predicted and GT x, y, w, h to integers (numpy half-to-even, as TrackingNet's devkit).
    round_boxes: bool = False
    # --- ground-truth categories ---
    #: NaN in a GT row: an error, or an invalid frame.
    nan_gt: Literal["error", "invalid"] = "invalid"
    #: when is a GT box valid: w > 0 and h > 0 / all four values > 0 / all finite / always.
    gt_valid_rule: Literal["positive_size", "all_positive", "finite", "any"] = "positive_size"
    invalid_gt_iou: Outcome = "fail"
    invalid_gt_center: Outcome = "fail"
    invalid_gt_norm_center: Outcome = "success"
    #: use the dataset's per-frame visibility (LaSOT absent flags, GOT-10k cover, ...).
    use_visibility: bool = False
    #: where visibility comes from: the sequence's ``visible`` mask or GOT-10k's ``cover`` label (> 0).
    visibility_source: Literal["visible", "cover"] = "visible"
    #: what an absent frame is, for all three metrics (takes precedence over the invalid-GT outcomes).
    absent: Literal["fail", "drop", "score"] = "fail"
    #: per-sequence denominator: all (non-dropped) frames, or only valid and visible frames.
    denominator: Literal["all", "valid"] = "all"
    # --- geometry ---
    #: centre = x + (w + c) / 2 with c = -1 (pixel-inclusive), 0 (continuous) or +1 (TrackingNet).
    center_offset: Literal[-1, 0, 1] = -1
    #: IoU = inter / (union + eps) (got10k toolkit uses machine epsilon), then clipped to [0, 1] if asked.
    iou_union_eps: float = 0.0
    clip_iou: bool = False
    #: normalised error divides by max(floor, GT w / h) (got10k toolkit: 1); 0 divides by the GT size.
    norm_size_floor: float = 0.0
    #: clip both boxes to the image (W, H) before the IoU (GOT-10k).
    clip_to_image: bool = False
    # --- curves and scores ---
    #: threshold set name in :data:`THRESHOLD_SETS`.
    thresholds: str = "pytracking"
    #: success counts IoU >= t (TrackingNet) instead of IoU > t.
    success_inclusive: bool = False
    #: sequence_mean: average per-sequence curves; frame_pooled: pool frames of all sequences (GOT-10k AO).
    aggregation: Literal["sequence_mean", "frame_pooled"] = "sequence_mean"
    #: drop sequences whose whole curve is zero before averaging (OTB / LaSOT MATLAB ``aa(sum(aa,2)>eps,:)``).
    drop_zero_sequences: bool = False
    #: precision / normalised precision score: curve value at 20 px / 0.20, mean of the curve (area), or
    #: the trapezoid rule on x = linspace(0, 1, n) (TrackingNet; also used for success then).
    precision_score: Literal["at_threshold", "area", "trapezoid"] = "at_threshold"
    norm_precision_score: Literal["at_threshold", "area", "trapezoid"] = "at_threshold"
    success_score: Literal["mean", "trapezoid"] = "mean"

    def with_options(self, **changes: object) -> Protocol:
        """A copy with some options changed; unknown option names are an error."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise KeyError(f"unknown protocol option(s) {unknown}; known: {sorted(known)}")
        return replace(self, **changes)


def matlab_colon(start: float, step: float, stop: float) -> np.ndarray:
    """``start:step:stop`` as MATLAB computes it (symmetric from both ends, so ``stop`` is exact)."""
    n = int(np.floor((stop - start) / step + 1e-10))
    k = np.arange(n + 1, dtype=np.float64)
    head = start + k * step
    tail = stop - (n - k) * step
    return np.where(k < n / 2, head, tail)


@dataclass(frozen=True)
class ThresholdSet:
    """Thresholds of the three curves: IoU (success), centre pixels (precision), normalised (norm. prec.)."""

    overlap: np.ndarray
    center: np.ndarray
    norm_center: np.ndarray
    center_at: float = 20.0
    norm_center_at: float = 0.2


def _threshold_sets() -> dict[str, ThresholdSet]:
    px = np.arange(51, dtype=np.float64)
    return {
        # MATLAB 0:0.05:1, 0:50 and (0:50)/100 [OTB, LaSOT toolkit].
        "matlab": ThresholdSet(matlab_colon(0.0, 0.05, 1.0), px, px / 100.0),
        # torch.arange(0, 1.05, 0.05), arange(0, 51), arange(0, 51) / 100 [pytracking, pysot].
        "pytracking": ThresholdSet(np.arange(21, dtype=np.float64) * 0.05, px, px / 100.0),
        # np.linspace(0, 1, 21), arange(0, 51), linspace(0, 0.5, 51) [got10k toolkit].
        "got10k": ThresholdSet(np.linspace(0, 1, 21), px, np.linspace(0, 0.5, 51)),
        # 101-point success curve of GOT-10k.
        "got10k_101": ThresholdSet(np.linspace(0, 1, 101), px, np.linspace(0, 0.5, 51)),
        # 21 points each: linspace(0, 1), linspace(0, 50), linspace(0, 0.5) [TrackingNet devkit].
        "trackingnet": ThresholdSet(np.linspace(0, 1, 21), np.linspace(0, 50, 21), np.linspace(0, 0.5, 21)),
    }


#: threshold-set name (``Protocol.thresholds``) -> its thresholds.
THRESHOLD_SETS: Registry[ThresholdSet] = Registry("threshold set", _threshold_sets())

_PYTRACKING = Protocol(
    name="pytracking",
    description="pytracking analysis/extract_results.py (OTB, NfS, TPL, ...): NaN/negative predictions are "
    "errors, invalid GT frames fail IoU and precision, succeed norm. precision, denominator = all frames",
    nan_gt="error",
)

#: protocol name (``--protocol``, :data:`DATASET_PROTOCOLS`) -> the protocol.
PROTOCOLS: Registry[Protocol] = Registry(
    "evaluation protocol",
    {
        p.name: p
        for p in [
            Protocol(
                name="otb_matlab",
                description="OTB MATLAB toolkit (calcSeqErrRobust.m, plotDrawSave.m)",
                nan_prediction="previous",
                nan_row="all",
                negative_size_prediction="previous",
                zero_size_prediction="previous",
                longer_prediction="error",
                shorter_prediction="error",
                gt_valid_rule="all_positive",
                invalid_gt_iou="fail",
                invalid_gt_center="success",
                invalid_gt_norm_center="success",
                thresholds="matlab",
                drop_zero_sequences=True,
            ),
            Protocol(
                name="lasot_matlab",
                description="LaSOT MATLAB toolkit (calc_seq_err_robust.m, eval_tracker.m): as OTB, absent frames "
                "removed but still in the denominator (they fail)",
                nan_prediction="previous",
                negative_size_prediction="previous",
                zero_size_prediction="previous",
                longer_prediction="truncate",
                shorter_prediction="error",
                gt_valid_rule="all_positive",
                invalid_gt_iou="fail",
                invalid_gt_center="success",
                invalid_gt_norm_center="success",
                use_visibility=True,
                absent="fail",
                thresholds="matlab",
                drop_zero_sequences=True,
            ),
            _PYTRACKING,
            _PYTRACKING.with_options(
                name="pytracking_uav",
                description="pytracking for UAV123: NaN GT rows are invalid frames that count as precision "
                "successes (centre error -1)",
                nan_gt="invalid",
                invalid_gt_center="success",
            ),
            _PYTRACKING.with_options(
                name="pytracking_nfs",
                description="pytracking for NfS read from the raw VATIC files: frames without an annotation (NaN "
                "rows) are invalid frames instead of an exception (pytracking's repackaged NfS has none)",
                nan_gt="invalid",
            ),
            _PYTRACKING.with_options(
                name="pytracking_lasot",
                description="pytracking for LaSOT: invisible frames fail all metrics, shorter results are errors",
                use_visibility=True,
                absent="fail",
                shorter_prediction="error",
            ),
            _PYTRACKING.with_options(
                name="pytracking_visibility",
                description="pytracking with per-frame visibility (absent frames fail all metrics); NaN GT rows "
                "are invalid frames (embedded synthetic data, OTB-layout folders with absent.label)",
                use_visibility=True,
                absent="fail",
                nan_gt="invalid",
            ),
            Protocol(
                name="got10k_toolkit",
                description="got10k toolkit ExperimentOTB/UAV123/NfS: continuous IoU (+eps, clipped), length "
                "mismatch truncates both, no bad-row fixes (NaN rows fail, GT NaN rows included)",
                nan_prediction="score",
                negative_size_prediction="score",
                zero_size_prediction="score",
                longer_prediction="truncate",
                shorter_prediction="truncate_gt",
                gt_valid_rule="any",
                invalid_gt_iou="score",
                invalid_gt_center="score",
                invalid_gt_norm_center="score",
                iou_union_eps=float(np.finfo(np.float64).eps),
                clip_iou=True,
                norm_size_floor=1.0,
                thresholds="got10k",
                norm_precision_score="area",
            ),
            Protocol(
                name="got10k_toolkit_lasot",
                description="got10k toolkit ExperimentLaSOT: as got10k_toolkit, but NaN GT rows are dropped; "
                "absent flags ignored; norm. precision = area of the 51-point curve, error / max(1, GT w, h)",
                nan_prediction="score",
                negative_size_prediction="score",
                zero_size_prediction="score",
                longer_prediction="truncate",
                shorter_prediction="truncate_gt",
                gt_valid_rule="finite",
                invalid_gt_iou="drop",
                invalid_gt_center="drop",
                invalid_gt_norm_center="drop",
                iou_union_eps=float(np.finfo(np.float64).eps),
                clip_iou=True,
                norm_size_floor=1.0,
                thresholds="got10k",
                norm_precision_score="area",
            ),
            Protocol(
                name="got10k_val",
                description="got10k toolkit ExperimentGOT10k: frame 1 and cover==0 frames excluded, boxes "
                "clipped to the image, AO/SR pooled over all frames of all sequences and runs",
                nan_prediction="score",
                negative_size_prediction="score",
                zero_size_prediction="score",
                longer_prediction="error",
                shorter_prediction="error",
                exclude_first_frame=True,
                gt_valid_rule="any",
                invalid_gt_iou="score",
                invalid_gt_center="score",
                invalid_gt_norm_center="score",
                use_visibility=True,
                visibility_source="cover",
                absent="drop",
                iou_union_eps=float(np.finfo(np.float64).eps),
                clip_iou=True,
                clip_to_image=True,
                thresholds="got10k_101",
                aggregation="frame_pooled",
            ),
            Protocol(
                name="trackingnet",
                description="TrackingNet devkit metrics.py: boxes rounded to integers, IoU >= t, every score is "
                "np.trapz(curve, x=linspace(0, 1, 21)) x 100",
                nan_prediction="score",
                negative_size_prediction="score",
                zero_size_prediction="score",
                longer_prediction="truncate",
                shorter_prediction="pad_nan",
                round_boxes=True,
                gt_valid_rule="any",
                invalid_gt_iou="score",
                invalid_gt_center="score",
                invalid_gt_norm_center="score",
                center_offset=1,
                thresholds="trackingnet",
                success_inclusive=True,
                success_score="trapezoid",
                precision_score="trapezoid",
                norm_precision_score="trapezoid",
            ),
            Protocol(
                name="pysot",
                description="pysot-toolkit OPEBenchmark: no first-frame replacement, invalid GT fails IoU and "
                "succeeds precision, LaSOT absent frames removed but counted",
                nan_prediction="score",
                negative_size_prediction="score",
                zero_size_prediction="score",
                longer_prediction="error",
                shorter_prediction="error",
                first_frame_gt=False,
                gt_valid_rule="positive_size",
                invalid_gt_iou="fail",
                invalid_gt_center="success",
                invalid_gt_norm_center="success",
                use_visibility=True,
                absent="fail",
                clip_iou=True,
                thresholds="pytracking",
            ),
        ]
    },
)

#: THE mapping dataset name -> default protocol (the toolkit whose numbers papers report for it).
DATASET_PROTOCOLS: dict[str, str] = {
    "otb": "otb_matlab",
    "lasot": "lasot_matlab",
    "lasot_test": "lasot_matlab",
    "uav": "pytracking_uav",
    "nfs": "pytracking_nfs",
    "got10k_val": "got10k_val",
    "trackingnet": "trackingnet",
    "synthetic": "pytracking_visibility",
    "real_footage": "pytracking_visibility",
    "folder": "pytracking_visibility",
}


def get_protocol(name: str) -> Protocol:
    """A protocol by its name (a key of :data:`PROTOCOLS`); an unknown name raises
    :class:`ltr.admin.registry.UnknownName` (a KeyError)."""
    return PROTOCOLS[name]


def protocol_for_dataset(dataset: str) -> Protocol:
    """The default protocol of a dataset (see :data:`DATASET_PROTOCOLS`)."""
    if dataset not in DATASET_PROTOCOLS:
        raise KeyError(
            f"no default evaluation protocol for dataset {dataset!r}; pass one of {sorted(PROTOCOLS)} "
            f"explicitly (datasets with defaults: {sorted(DATASET_PROTOCOLS)})"
        )
    return get_protocol(DATASET_PROTOCOLS[dataset])
