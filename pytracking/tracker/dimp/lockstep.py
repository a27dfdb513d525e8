"""One frame of many DiMP trackers at once: their network calls batched, every other rule per tracker.

:func:`track_frames` advances B trackers (one sequence each, at any frame of it) by one frame: the B search
crops go through the backbone and the classifier feature head as one batch, every tracker's filter scores
its own crop in one grouped call, and the box refinement ascends all refined trackers' candidates together.
Crops, localisation, the sample memories and the filter optimisation stay per tracker (the trackers'
:meth:`~.tracker.DiMPTracker.begin_frame`, ``localise``, ``refine_start``, ``refine_end``, ``learn`` and
``end_frame``). A tracker's boxes are therefore those it gets alone, up to the float rounding of batched
convolutions and matrix products. :meth:`DiMPTracker.track <.tracker.DiMPTracker.track>` is this function
for one tracker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ltr.models.tracking import CLF_LAYER
from pytracking.tracker.dimp.frames import upload
from pytracking.tracker.dimp.localize import NOT_FOUND
from pytracking.tracker.dimp.precision import convolution_precision
from pytracking.tracker.dimp.refine import AscentOptions, RefineResult, refine_boxes
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer

if TYPE_CHECKING:
    from pytracking.tracker.dimp.tracker import DiMPTracker

__all__ = ["FrameCrop", "check_batchable", "track_frames"]


class FrameCrop(NamedTuple):
    """One tracker's search crop of a frame: ``x`` (1, 3, H, W) network input on the tracker's device,
    ``coords`` (4,) its [y1, x1, y2, x2] in image pixels, ``sample_pos`` (2,) its centre (y, x) and
    ``sample_scale`` (scalar) image pixels per crop pixel (CPU)."""

    x: Tensor
    coords: Tensor
    sample_pos: Tensor
    sample_scale: Tensor


def check_batchable(trackers: Sequence[DiMPTracker]) -> None:
    """Raise ValueError unless ``trackers`` can share batched network calls: the same network object,
    crop geometry and parameters, and stages that take batches (ONNX Runtime's exports do not)."""
    lead = trackers[0]
    for other in trackers[1:]:
        if other.net is not lead.net or other.geometry != lead.geometry or other.params != lead.params:
            raise ValueError("trackers tracked in lockstep must share one network, geometry and parameters")
    if len(trackers) > 1 and not getattr(lead.stages, "batched", False):
        raise ValueError(f"the {lead.params.backend} backend tracks one sequence at a time (no batches)")


def _stack(tensors: list[Tensor]) -> Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)


@torch.no_grad()
def track_frames(
    trackers: Sequence[DiMPTracker],
    frames: Sequence[np.ndarray | Tensor],
    *,
    timer: StageTimer = NULL_TIMER,
    pad_to: int | None = None,
) -> list[np.ndarray]:
    """Track one frame for each tracker (``frames[i]`` for ``trackers[i]``, each initialised); returns each
    tracker's box (4,) float64 xywh image pixels, and sets each tracker's ``debug_info``.

    ``pad_to``: repeat the last crop up to this batch size for the backbone and feature head (compiled
    stages then see one input shape, whatever the number of trackers). A frame of another size than the
    tracker's first raises ``FrameSizeError`` before any tracker changes state.
    """
    if len(trackers) != len(frames) or not trackers:
        raise ValueError(f"track_frames needs one frame per tracker, got {len(frames)} for {len(trackers)}")
    check_batchable(trackers)
    with convolution_precision(trackers[0].params.tf32):
        return _track_frames(trackers, frames, timer, pad_to)


def _track_frames(
    trackers: Sequence[DiMPTracker],
    frames: Sequence[np.ndarray | Tensor],
    timer: StageTimer,
    pad_to: int | None,
) -> list[np.ndarray]:
    lead = trackers[0]
    stages, p = lead.stages, lead.params
    n = len(trackers)
    with timer.stage("crop"):
        for t, f in zip(trackers, frames, strict=True):
            t.check_frame(f)
        crops = [t.begin_frame(f) for t, f in zip(trackers, frames, strict=True)]
        x = _stack([c.x for c in crops])
        if pad_to is not None and pad_to > n:
            x = torch.cat([x, x[-1:].expand(pad_to - n, -1, -1, -1)])
    with timer.stage("backbone"):
        feats = stages.backbone(x)
    with timer.stage("classifier"):
        clf = stages.clf_features(feats[CLF_LAYER])  # (B, C, h, w)
        if x.shape[0] > n:
            feats = {k: v[:n] for k, v in feats.items()}
            clf = clf[:n]
        filters = _stack([t.filter for t in trackers])
        scores = lead.preprocess_scores(stages.classify(filters, clf)).cpu()  # (B, H', W')
    with timer.stage("localisation"):
        locs = [t.localise(c, s) for t, c, s in zip(trackers, crops, scores, strict=True)]
    refined: list[RefineResult | None] = [None] * n
    with timer.stage("refinement"):
        todo = [i for i, loc in enumerate(locs) if loc.state != NOT_FOUND] if p.refine else []
        if todo:
            starts = [trackers[i].refine_start(crops[i]) for i in todo]
            device = lead.device
            modulation = tuple(_stack([trackers[i].modulation[k] for i in todo]) for k in range(2))
            sub = feats  # the refined trackers' backbone features (all of them: no copy)
            if len(todo) < n:
                index = upload(todo, device)
                sub = {k: v.index_select(0, index) for k, v in feats.items()}
            modulated = stages.box_features(sub, modulation)  # type: ignore[arg-type]
            options = AscentOptions(
                p.refine_space, p.refine_mode, p.refine_iters, p.refine_step, p.refine_decay
            )
            results = refine_boxes(
                lambda start: stages.ascend(modulated, upload(start, device), options),
                torch.stack([s[0] for s in starts]),
                torch.stack([s[1] for s in starts]),
                jitter_pos=p.box_jitter_pos,
                jitter_size=p.box_jitter_size,
                max_aspect_ratio=p.max_aspect_ratio,
                top_k=p.refine_top_k,
            )
            for i, result in zip(todo, results, strict=True):
                trackers[i].refine_end(crops[i], result, locs[i])
                refined[i] = result
    with timer.stage("update"):
        for i, t in enumerate(trackers):
            t.learn(crops[i], locs[i], clf[i : i + 1])
    return [t.end_frame(c, loc, r) for t, c, loc, r in zip(trackers, crops, locs, refined, strict=True)]
