"""One frame of many DiMP trackers at once: their network calls and most per-frame rules batched.

:func:`track_frames` advances B trackers (one sequence each, at any frame of it) by one frame: the B search
crops go through the backbone and the classifier feature head as one batch, every tracker's filter scores
its own crop in one grouped call, the localisation decides on all score maps at once
(:func:`~.localize.localize_batch`), the box refinement ascends all refined trackers' candidates together,
and the trackers whose frame calls for filter optimizer steps take them in one optimizer call per number of
steps; the crop windows, the refined boxes' selection and their blend into the states, the sample memories'
weight updates and the conversions between the trackers' states and boxes run on all rows at once too. Per
tracker stay the pixels cut from its own frame, its candidate draws (its own generator), the writes of its
new sample into its memory and its learning decisions (the trackers'
:meth:`~.tracker.DiMPTracker.begin_frame`, ``candidate_draws``, ``learn`` and ``end_frame``). A tracker's
boxes are therefore those it gets alone, up to the float rounding of batched convolutions and matrix
products. :meth:`DiMPTracker.track <.tracker.DiMPTracker.track>` is this function for one tracker.

A step runs in three phases, each issuing device work the next one waits for: crops and network calls up to
the classifier's scores (:func:`_start`); localisation and the refinement's ascent (:func:`_localise_and_refine`);
the refined boxes' selection, the memory and filter updates and the frame's end (:func:`_finish`). With
``groups`` > 1 the trackers form several batches whose phases are interleaved (all groups' first phases,
then all second phases, ...), so that on a GPU the host works on one group while the device computes another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ltr.models.tracking import CLF_LAYER
from pytracking.tracker.dimp.frames import concat, pad_rows, upload
from pytracking.tracker.dimp.localize import NOT_FOUND, UNCERTAIN, Localization, localize_batch, motion_window
from pytracking.tracker.dimp.memory import add_samples
from pytracking.tracker.dimp.patches import sample_patches
from pytracking.tracker.dimp.precision import convolution_precision
from pytracking.tracker.dimp.refine import AscentOptions, RefineResult, candidate_boxes, select_refined
from pytracking.tracker.dimp.state_boxes import box_in_crop, boxes_in_image, target_boxes
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer

if TYPE_CHECKING:
    from pytracking.tracker.dimp.tracker import DiMPTracker

__all__ = ["FrameCrop", "check_batchable", "track_frames"]


class FrameCrop(NamedTuple):
    """One tracker's search crop of a frame: ``coords`` (4,) its [y1, x1, y2, x2] in image pixels,
    ``sample_pos`` (2,) its centre (y, x) and ``sample_scale`` (scalar) image pixels per crop pixel (CPU)."""

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


@torch.no_grad()
def track_frames(
    trackers: Sequence[DiMPTracker],
    frames: Sequence[np.ndarray | Tensor],
    *,
    timer: StageTimer = NULL_TIMER,
    pad_to: int | None = None,
    groups: int = 1,
) -> list[np.ndarray]:
    """Track one frame for each tracker (``frames[i]`` for ``trackers[i]``, each initialised); returns each
    tracker's box (4,) float64 xywh image pixels, and sets each tracker's ``debug_info``.

    ``pad_to``: repeat the last crop up to this batch size for the backbone and feature head (compiled
    stages then see one input shape, whatever the number of trackers). A frame of another size than the
    tracker's first raises ``FrameSizeError`` before any tracker changes state.

    ``groups``: split the trackers into this many batches of consecutive trackers (near-equal sizes) and
    interleave their steps: every group's crops and network calls are issued before the host waits for the
    first group's scores, and every group's refinement before it waits for the first group's boxes. On a
    GPU, which runs what the host issued in order while the host goes on, one group's host work (crops,
    localisation, selection, memory updates) then overlaps another group's network time. Each tracker's
    calls happen in its own order as before, so its boxes stay those it gets alone, up to the float
    rounding of the smaller batches. ``pad_to`` applies to each group.
    """
    if len(trackers) != len(frames) or not trackers:
        raise ValueError(f"track_frames needs one frame per tracker, got {len(frames)} for {len(trackers)}")
    if groups < 1:
        raise ValueError(f"track_frames needs groups >= 1, got {groups}")
    check_batchable(trackers)
    for t, f in zip(trackers, frames, strict=True):
        t.check_frame(f)
    bounds = np.linspace(0, len(trackers), min(groups, len(trackers)) + 1).round().astype(int)
    parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    with convolution_precision(trackers[0].params.tf32):
        steps = [_start(trackers[part], frames[part], timer, pad_to) for part in parts]
        for step in steps:
            _localise_and_refine(step, timer)
        return [box for step in steps for box in _finish(step, timer)]


@dataclass
class _Step:
    """One group's frame in flight: what :func:`_start` issued and the later phases fill in."""

    trackers: Sequence[DiMPTracker]
    crops: list[FrameCrop]
    feats: dict[str, Tensor]
    clf: Tensor
    scores: Tensor  # (B, H', W') on the device until localisation
    locs: list[Localization] = field(default_factory=list)
    todo: list[int] = field(default_factory=list)  # the refined trackers
    ascent: tuple[Tensor, Tensor] | None = None  # their refined candidates and scores, on the device


def _start(
    trackers: Sequence[DiMPTracker],
    frames: Sequence[np.ndarray | Tensor],
    timer: StageTimer,
    pad_to: int | None,
) -> _Step:
    """Crops, backbone, classifier features and scores of one group (issued, not waited for)."""
    lead = trackers[0]
    stages = lead.stages
    n = len(trackers)
    with timer.stage("crop"):
        x, crops = _crop(trackers, frames)
        if pad_to is not None:
            x = pad_rows(x, pad_to)
    with timer.stage("backbone"):
        feats = stages.backbone(x)
    with timer.stage("classifier"):
        clf = stages.clf_features(feats[CLF_LAYER])  # (B, C, h, w)
        if x.shape[0] > n:
            feats = {k: v[:n] for k, v in feats.items()}
            clf = clf[:n]
        filters = concat([t.filter for t in trackers])
        scores = lead.preprocess_scores(stages.classify(filters, clf))  # (B, H', W')
    return _Step(trackers, crops, feats, clf, scores)


def _localise_and_refine(step: _Step, timer: StageTimer) -> None:
    """Localise every tracker of the group (waits for its scores) and issue the refinement of those found."""
    trackers, crops = step.trackers, step.crops
    lead = trackers[0]
    stages, p = lead.stages, lead.params
    with timer.stage("localisation"):
        step.locs = _localise(trackers, crops, step.scores.cpu())
    with timer.stage("refinement"):
        step.todo = [i for i, loc in enumerate(step.locs) if loc.state != NOT_FOUND] if p.refine else []
        if not step.todo:
            return
        todo = step.todo
        device = lead.device
        modulation = tuple(concat([trackers[i].modulation[k] for i in todo]) for k in range(2))
        sub = step.feats  # the refined trackers' backbone features (all of them: no copy)
        if len(todo) < len(trackers):
            index = upload(todo, device)
            sub = {k: v.index_select(0, index) for k, v in step.feats.items()}
        modulated = stages.box_features(sub, modulation)  # type: ignore[arg-type]
        current = _boxes_in_crops([trackers[i] for i in todo], [crops[i] for i in todo])  # (n, 4)
        draws = torch.stack([trackers[i].candidate_draws() for i in todo])
        start = candidate_boxes(current, p.num_random_boxes, p.box_jitter_pos, p.box_jitter_size, draws)
        options = AscentOptions(p.refine_space, p.refine_mode, p.refine_iters, p.refine_step, p.refine_decay)
        step.ascent = stages.ascend(modulated, start, options)  # host boxes: the stages upload them


def _finish(step: _Step, timer: StageTimer) -> list[np.ndarray]:
    """Take the refined boxes (waits for them), update the memories and filters, and end the frame."""
    trackers, crops, locs = step.trackers, step.crops, step.locs
    lead = trackers[0]
    p = lead.params
    refined: list[RefineResult | None] = [None] * len(trackers)
    with timer.stage("selection"):
        if step.ascent is not None:
            results = select_refined(*step.ascent, max_aspect_ratio=p.max_aspect_ratio, top_k=p.refine_top_k)
            todo = step.todo
            _take_refined(
                [trackers[i] for i in todo], [crops[i] for i in todo], [locs[i] for i in todo], results
            )
            for i, result in zip(todo, results, strict=True):
                refined[i] = result
    with timer.stage("update"):
        boxes = _boxes_in_crops(trackers, crops)  # the new samples' boxes (before learn restores positions)
        plans = [t.learn(loc) for t, loc in zip(trackers, locs, strict=True)]
        adding = [i for i, (lr, _) in enumerate(plans) if lr is not None]
        if adding:
            add_samples(
                [trackers[i].memory for i in adding],
                step.clf[adding],
                boxes[adding],
                [plans[i][0] for i in adding],  # type: ignore[misc]
            )
        steps = [n for _, n in plans]
        for n in sorted(set(steps) - {0}):
            _optimise([t for t, k in zip(trackers, steps, strict=True) if k == n], n)
    kept = [i for i, r in enumerate(refined) if r is not None and r.box is not None]
    in_image: list[Tensor | None] = [None] * len(trackers)
    if kept:  # the refined candidates in image pixels, for debug_info
        sample_pos = torch.stack([crops[i].sample_pos for i in kept])[:, None]
        sample_scale = torch.stack([crops[i].sample_scale for i in kept])[:, None, None]
        candidates = torch.stack([refined[i].boxes for i in kept])  # type: ignore[union-attr]
        rows = boxes_in_image(candidates, sample_pos, sample_scale, lead.img_sample_sz)
        for i, row in zip(kept, rows, strict=True):
            in_image[i] = row
    for t, crop, loc, candidates in zip(trackers, crops, locs, in_image, strict=True):
        t.end_frame(crop, loc, candidates)
    out = target_boxes(torch.stack([t.pos for t in trackers]), torch.stack([t.target_sz for t in trackers]))
    return list(out.copy())


def _take_refined(
    trackers: Sequence[DiMPTracker],
    crops: Sequence[FrameCrop],
    locs: Sequence[Localization],
    results: Sequence[RefineResult],
) -> None:
    """Each tracker's refined box (crop pixels) into its state: the new position, size and (unless the frame
    was uncertain and the parameters keep the scale then) scale; trackers without a refined box keep theirs.

    The size moves to the box's at once, as in the reference (``scale_learning_rate`` 1); our options blend
    it geometrically, per side, or (``aspect_learning_rate``) the scale sqrt(w h) and the aspect w / h each
    at its own rate."""
    kept = [j for j, result in enumerate(results) if result.box is not None]
    if not kept:
        return
    lead = trackers[0]
    p = lead.params
    box = torch.stack([results[j].box for j in kept])  # type: ignore[misc]
    sample_pos = torch.stack([crops[j].sample_pos for j in kept])
    sample_scale = torch.stack([crops[j].sample_scale for j in kept])[:, None]
    old_sz = torch.stack([trackers[j].target_sz for j in kept])  # (h, w)
    centre = box[:, :2] + box[:, 2:] / 2
    new_pos = (centre.flip(-1) - (lead.img_sample_sz - 1) / 2) * sample_scale + sample_pos
    new_sz = box[:, 2:].flip(-1) * sample_scale
    rate, aspect_rate = p.scale_learning_rate, p.aspect_learning_rate
    if aspect_rate is not None and aspect_rate != rate:
        old_scale, new_scale = old_sz.prod(-1).sqrt(), new_sz.prod(-1).sqrt()
        old_aspect, new_aspect = old_sz[:, 1] / old_sz[:, 0], new_sz[:, 1] / new_sz[:, 0]
        scale = old_scale ** (1.0 - rate) * new_scale**rate
        aspect = old_aspect ** (1.0 - aspect_rate) * new_aspect**aspect_rate
        new_sz = torch.stack([scale / aspect.sqrt(), scale * aspect.sqrt()], dim=-1)
    elif rate < 1.0:
        new_sz = old_sz ** (1.0 - rate) * new_sz**rate
    base = torch.stack([trackers[j].base_target_sz for j in kept])
    target_scale = torch.sqrt(new_sz.prod(-1) / base.prod(-1))
    rows = zip(kept, new_pos.unbind(0), new_sz.unbind(0), target_scale.unbind(0), strict=True)
    for j, pos, sz, scale in rows:
        t = trackers[j]
        t.pos = t.pos_refined = pos
        t.target_sz = sz
        if p.update_scale_when_uncertain or locs[j].state != UNCERTAIN:
            t.target_scale = scale


def _boxes_in_crops(trackers: Sequence[DiMPTracker], crops: Sequence[FrameCrop]) -> Tensor:
    """(B, 4) xywh: each tracker's current target box in its crop of this frame, crop pixels."""
    return box_in_crop(
        torch.stack([t.pos for t in trackers]),
        torch.stack([t.target_sz for t in trackers]),
        torch.stack([c.sample_pos for c in crops]),
        torch.stack([c.sample_scale for c in crops])[:, None],
        trackers[0].img_sample_sz,
    )


def _crop(
    trackers: Sequence[DiMPTracker], frames: Sequence[np.ndarray | Tensor]
) -> tuple[Tensor, list[FrameCrop]]:
    """Start every tracker's frame and cut its search crop: the network input (B, 3, H, W) (normalised, on
    the trackers' device) and each crop's :class:`FrameCrop`.

    A crop of ``target_scale`` x the geometry's crop size is centred on the target, moved by half a feature
    cell where the score map and the feature map differ in parity (the reference's rule), and resized to the
    crop size (:func:`~.patches.sample_patches`)."""
    lead = trackers[0]
    geo = lead.geometry
    images = [t.begin_frame(f) for t, f in zip(trackers, frames, strict=True)]
    scale = torch.stack([t.target_scale for t in trackers])[:, None]  # (B, 1)
    odd = (lead.feature_sz + lead.kernel_size) % 2
    centre = torch.stack([t.pos for t in trackers]) + odd * scale * lead.img_sample_sz / (2 * lead.feature_sz)
    patches, coords = sample_patches(
        images,
        centre,
        scale * lead.img_sample_sz,
        lead.img_sample_sz,
        mode=geo.crop_mode,
        max_scale_change=geo.max_scale_change,
    )
    coords = coords.float()
    sample_pos = 0.5 * (coords[:, :2] + coords[:, 2:] - 1)
    sample_scale = ((coords[:, 2:] - coords[:, :2]) / lead.img_sample_sz).prod(dim=1).sqrt()
    crops = [FrameCrop(*crop) for crop in zip(coords, sample_pos, sample_scale, strict=True)]
    return lead.normalize(patches.to(lead.device)), crops


def _localise(trackers: Sequence[DiMPTracker], crops: list[FrameCrop], scores: Tensor) -> list[Localization]:
    """Localise each tracker on its crop's preprocessed scores (row i of ``scores`` (B, H', W'), CPU) and move
    each found target there: its position only when refinement follows (the refined box then sets the size
    and scale), else also its scale to the crop's."""
    lead = trackers[0]
    p = lead.params
    h, w = scores.shape[1:]
    # the trackers share the crop geometry and network (check_batchable): one cell size, image pixels
    cell = lead.img_sample_sz / (torch.tensor([float(h), float(w)]) - (lead.kernel_size + 1) % 2)
    sample_pos = torch.stack([c.sample_pos for c in crops])
    sample_scale = torch.stack([c.sample_scale for c in crops])[:, None]
    previous = (torch.stack([t.pos for t in trackers]) - sample_pos) / (cell * sample_scale)  # cells
    if p.score_window > 0:
        centre = previous + torch.tensor([(h - 1) / 2, (w - 1) / 2])
        windows = [motion_window((h, w), c.to(scores.device), p.score_window) for c in centre]
        scores = scores * torch.stack(windows)
    sizes = torch.stack([t.target_sz for t in trackers]) / sample_scale / cell
    locs = localize_batch(scores, previous, sizes, lead.thresholds, advanced=p.advanced_localization)
    found = [i for i, loc in enumerate(locs) if loc.state != NOT_FOUND]
    if not found:
        return locs
    index = torch.tensor(found)
    disp = torch.stack([locs[i].disp for i in found])
    new_pos = sample_pos[index] + disp * cell * sample_scale[index]
    if not p.refine:
        for i in found:
            trackers[i].set_scale(crops[i].sample_scale)
    # the target's centre stays inside the image by (target_inside_ratio - 1/2) of its size
    inside = (p.target_inside_ratio - 0.5) * torch.stack([trackers[i].target_sz for i in found])
    limit = torch.stack([trackers[i].image_sz for i in found]) - inside
    for i, pos in zip(found, torch.max(torch.min(new_pos, limit), inside), strict=True):
        trackers[i].pos = pos
    return locs


def _optimise(trackers: Sequence[DiMPTracker], num_iter: int) -> None:
    """``num_iter`` filter optimizer steps for each tracker on its sample memory, all in one call: the
    memories' first S slots side by side, S the fullest memory's count (the others' extra slots have weight
    zero, which leaves them out of the objective)."""
    count = max(t.memory.count for t in trackers)
    feats, boxes, weights = zip(*(t.memory.filled(count) for t in trackers), strict=True)
    filters = trackers[0].stages.optimize(
        concat([t.filter for t in trackers]),
        _stack_samples(feats),
        _stack_samples(boxes),
        _stack_samples(weights),
        num_iter,
    )
    for i, t in enumerate(trackers):
        t.filter = filters[i : i + 1]


def _stack_samples(tensors: Sequence[Tensor]) -> Tensor:
    """(S, ...) per tracker -> (S, B, ...); a view for one tracker (its memory is not copied)."""
    return tensors[0][:, None] if len(tensors) == 1 else torch.stack(tensors, dim=1)
