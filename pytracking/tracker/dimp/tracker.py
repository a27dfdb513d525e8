"""The DiMP tracker with energy-based box refinement (DiMP-NCE+ at runtime).

``tracker.initialize(frame, box_xywh)`` then ``tracker.track(frame) -> (4,) float64 xywh`` per frame; frames
are numpy (H, W[, C]) RGB (gray and RGBA accepted) or torch (C, H, W); boxes are xywh in image pixels.

Per frame: search crop at the current position and scale with the shared crop function
(:func:`ltr.data.crop.sample_target_crops`), backbone, classification scores, localisation
(:mod:`.localize`), box refinement (:mod:`.refine`), sample-memory update (:mod:`.memory`) and periodic
filter optimisation with the network's own steepest-descent optimizer.

Host synchronisation: the state stays on the device as tensors; each frame reads the localisation state once
(it decides whether to refine, learn and optimise; the refinement window's bounds come in the same read) and
the output box once. The refinement scores boxes with the single-image PrRoIPool
(:func:`ltr.ops.prroi_pool_image`), which never reads device values. Everything runs under ``torch.no_grad``
with the weights frozen; the refinement turns autograd on for the box coordinates only.

Refinement window (``params.refine_window``): the box head's test features (two 3x3 convolutions per level,
about 60% of a ResNet-50 backbone's work at the SuperDiMP geometry) are computed only on the cells that boxes
within ``refine_window`` x sqrt(w h) of the classifier box can read, and the boxes are kept in that region
during the ascent; inside it the scores are exactly those on the whole maps (``refine_window=None``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ltr.models.target_classifier import apply_filter, score_cell_to_pixel
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, DiMPNet
from pytracking.tracker.dimp.augment import augmented_samples, feature_dropout
from pytracking.tracker.dimp.frames import crop_frame, frame_size_wh, prepare_frame
from pytracking.tracker.dimp.localize import (
    HARD_NEGATIVE,
    NORMAL,
    NOT_FOUND,
    UNCERTAIN,
    LocalizationThresholds,
    localize,
)
from pytracking.tracker.dimp.memory import SampleMemory
from pytracking.tracker.dimp.params import DiMPParams, Geometry
from pytracking.tracker.dimp.refine import refine_box
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer


class DiMPTracker:
    """DiMP-NCE+ tracker; see the module docstring.

    Args:
        net: a :class:`DiMPNet` in eval mode (``pytracking.tracker.dimp.network`` prepares one).
        geometry: the crop geometry of the network's train setting.
        params: runtime parameters.
        timer: optional :class:`StageTimer` (stages crop, backbone, classifier, localisation, refinement,
            update).
    """

    def __init__(
        self, net: DiMPNet, geometry: Geometry, params: DiMPParams, *, timer: StageTimer | None = None
    ) -> None:
        stride = net.backbone.strides[CLF_LAYER]
        if stride != geometry.feature_stride:
            raise ValueError(
                f"geometry.feature_stride ({geometry.feature_stride}) differs from the network's {CLF_LAYER} "
                f"stride ({stride})"
            )
        self.net = net.eval()
        if params.channels_last:
            self.net.to(memory_format=torch.channels_last)
        self.geometry = geometry
        self.params = params
        self.timer = timer or NULL_TIMER
        self.device = next(net.parameters()).device
        self.cell_to_pixel = score_cell_to_pixel(net.classifier.filter_size, stride)
        self.thresholds = LocalizationThresholds(
            params.target_not_found_threshold,
            params.distractor_threshold,
            params.hard_negative_threshold,
            params.target_neighborhood_scale,
            params.displacement_scale,
        )
        self._mean = torch.tensor(geometry.normalize_mean, device=self.device).reshape(1, 3, 1, 1) * 255.0
        self._std = torch.tensor(geometry.normalize_std, device=self.device).reshape(1, 3, 1, 1) * 255.0
        self.generator = torch.Generator().manual_seed(params.seed)
        self.frame_num = 0
        #: tensors of the last frame for visualisation (scores, state, refinement boxes in image pixels)
        self.debug_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------------ helpers
    def _normalize(self, crops: Tensor) -> Tensor:
        x = (crops - self._mean) / self._std
        return x.contiguous(memory_format=torch.channels_last) if self.params.channels_last else x

    def _clamp_state(self, centre: Tensor, size: Tensor) -> tuple[Tensor, Tensor]:
        """Keep the size within [min_target_size, image size] and the centre near the image."""
        size = torch.minimum(size.clamp(min=self.params.min_target_size), self.image_wh.clamp(min=1.0))
        margin = self.params.max_outside_fraction * size
        centre = torch.maximum(torch.minimum(centre, self.image_wh + margin), -margin)
        return centre, size

    def _box(self) -> Tensor:
        return torch.cat([self.centre - 0.5 * self.size, self.size])

    def _refine_window(self, position: Tensor, size: Tensor) -> Tensor:
        """(4,) xyxy crop pixels: the classifier box (centre ``position`` (2,), ``size`` (2,)) widened by
        ``refine_window`` x sqrt(w h) on every side; (0,) when refinement is off or uses the whole maps."""
        margin = self.params.refine_window
        if not self.params.refine or margin is None:
            return size.new_zeros(0)
        half = 0.5 * size + margin * torch.sqrt(size.prod().clamp(min=0))
        return torch.cat([position - half, position + half]).nan_to_num(0.0)

    def _box_scorer(
        self, feats: list[Tensor], window: list[float]
    ) -> tuple[Callable[[Tensor], Tensor], Tensor | None]:
        """The refinement's score function (1, S, 4) xywh crop px -> (1, S) and the (4,) xyxy bounds the boxes
        must stay in for it to be exact (None without a window: no bounds)."""
        head = self.net.box_head
        bounds = None
        if window:
            part = head.get_test_features_window(feats, window)
            test, origin = part.feats, part.origin
            bounds = torch.tensor(part.valid_xyxy, device=self.device)
        else:
            test, origin = head.get_test_features(feats), (0, 0)
        # PrRoIPool multiplies (H, W) matrices per channel: standard layout, not channels_last
        modulated = tuple(f.contiguous() for f in head.modulate(self.modulation, test))
        shift = torch.tensor([*origin, 0.0, 0.0], device=self.device)

        def score_fn(boxes: Tensor) -> Tensor:
            return head.score_modulated(modulated, boxes - shift)

        return score_fn, bounds

    def _optimize(self, num_iter: int) -> None:
        feats, boxes, weights = self.memory.filled()
        result = self.net.classifier.optimizer(
            self.filter, feats[:, None], boxes[:, None], sample_weight=weights[:, None], num_iter=num_iter
        )
        self.filter = result.filters

    # ------------------------------------------------------------------------------------------------ API
    @torch.no_grad()
    def initialize(self, frame: np.ndarray | Tensor, box_xywh: Any) -> None:
        """Start tracking the target ``box_xywh`` (4 numbers, xywh image pixels) in ``frame``."""
        box = np.asarray(box_xywh, dtype=np.float64).reshape(-1)
        if box.shape != (4,) or not np.isfinite(box).all():
            raise ValueError(f"init box must be 4 finite numbers x, y, w, h; got {box_xywh!r}")
        image = prepare_frame(frame, self.device)
        geo, p = self.geometry, self.params
        self.generator.manual_seed(p.seed)  # same sequence, same result, also when re-initialised
        self.image_wh = torch.tensor(frame_size_wh(image), dtype=torch.float32, device=self.device)
        box_t = torch.as_tensor(box, dtype=torch.float32, device=self.device)
        self.centre, self.size = self._clamp_state(box_t[:2] + 0.5 * box_t[2:].clamp(min=0), box_t[2:])
        samples = augmented_samples(
            image,
            self._box(),
            crop_size=geo.crop_size,
            search_area_factor=geo.search_area_factor,
            aug=p.augmentation,
            generator=self.generator,
        )
        feats = self.net.backbone(self._normalize(samples.crops))
        clf = self.net.classifier.extract_features(feats[CLF_LAYER])
        drop = feature_dropout(
            clf[:1], p.augmentation.dropout_copies, p.augmentation.dropout_prob, self.generator
        )
        clf = torch.cat([clf, drop])
        boxes = torch.cat([samples.boxes, samples.boxes[:1].expand(drop.shape[0], 4)])
        self.memory = SampleMemory(p.memory_size, init_min_weight=p.init_samples_min_weight)
        self.memory.initialize(clf, boxes)
        self.filter = self.net.classifier.initial_filter(clf[:, None], boxes[:, None])
        self._optimize(p.init_optim_iter)
        ref = [feats[n][:1] for n in BOX_LAYERS]
        self.modulation = self.net.box_head.get_modulation(ref, samples.boxes[:1])
        self.frame_num = 1
        self.debug_info = {"init_crops": samples.crops, "init_boxes": samples.boxes}

    @torch.no_grad()
    def track(self, frame: np.ndarray | Tensor) -> np.ndarray:
        """Track one frame; returns the target box (4,) float64 xywh in image pixels."""
        if self.frame_num == 0:
            raise RuntimeError("DiMPTracker.track called before initialize")
        self.frame_num += 1
        geo, p, t = self.geometry, self.params, self.timer
        with t.stage("crop"):
            image = prepare_frame(frame, self.device)
            self.image_wh = torch.tensor(frame_size_wh(image), dtype=torch.float32, device=self.device)
            crop, tf = crop_frame(
                image,
                self._box(),
                geo.search_area_factor,
                geo.crop_size,
                mode=geo.crop_mode,
                max_scale_change=geo.max_scale_change,
            )
            scale, offset = tf.scale[0], tf.offset[0]
            x = self._normalize(crop)
        with t.stage("backbone"):
            feats = self.net.backbone(x)
        with t.stage("classifier"):
            clf = self.net.classifier.extract_features(feats[CLF_LAYER])  # (1, C, h, w)
            scores = apply_filter(clf[:, None], self.filter)[0, 0]  # (H', W')
        with t.stage("localisation"):
            size_crop = self.size * scale
            loc = localize(
                scores,
                (self.centre - offset) * scale,
                size_crop,
                cell_to_pixel=self.cell_to_pixel,
                thresholds=self.thresholds,
            )
            window = self._refine_window(loc.position, size_crop)
            # the one mid-frame host synchronisation: the state, and the refinement window's bounds with it
            host = torch.cat([loc.state.reshape(1).to(size_crop.dtype), window]).tolist()
            state = int(host[0])
        refined = None
        if state != NOT_FOUND:
            classifier_box = torch.cat([loc.position - 0.5 * size_crop, size_crop])
            with t.stage("refinement"):
                if p.refine:
                    score_fn, bounds = self._box_scorer([feats[n] for n in BOX_LAYERS], host[1:])
                    refined = refine_box(
                        score_fn,
                        classifier_box,
                        mode=p.refine_mode,
                        num_iters=p.refine_iters,
                        step_length=p.refine_step,
                        decay=p.refine_decay,
                        num_random=p.num_random_boxes,
                        jitter_pos=p.box_jitter_pos,
                        jitter_size=p.box_jitter_size,
                        max_aspect_ratio=p.max_aspect_ratio,
                        top_k=p.refine_top_k,
                        generator=self.generator,
                        bounds_xyxy=bounds,
                    )
                    box_crop = refined.box
                else:
                    box_crop = classifier_box
                centre = (box_crop[:2] + 0.5 * box_crop[2:]) / scale + offset
                size = box_crop[2:] / scale
                if state == UNCERTAIN and not p.update_scale_when_uncertain:
                    size = self.size
                ok = torch.isfinite(centre).all() & torch.isfinite(size).all() & (size > 0).all()
                centre, size = self._clamp_state(
                    torch.where(ok, centre, self.centre), torch.where(ok, size, self.size)
                )
                self.centre, self.size = centre, size
        with t.stage("update"):
            if state in (NORMAL, HARD_NEGATIVE):
                hard = state == HARD_NEGATIVE
                lr = p.hard_negative_learning_rate if hard else p.learning_rate
                sample_box = torch.cat([(self.centre - 0.5 * self.size - offset) * scale, self.size * scale])
                self.memory.add(clf, sample_box, lr)
                if hard:
                    self._optimize(p.hard_negative_optim_iter)
                elif (self.frame_num - 1) % p.train_skipping == 0:
                    self._optimize(p.update_optim_iter)
        self.debug_info = {
            "scores": scores,
            "state": state,
            "crop_transform": tf,
            "refine_boxes": None
            if refined is None
            else refined.boxes / scale + torch.cat([offset, 0 * offset]),
        }
        return self._box().double().cpu().numpy()
