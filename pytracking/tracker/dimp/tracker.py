"""The DiMP tracker with energy-based box refinement: pytracking's DiMP tracker, rule for rule, in eager PyTorch.

``tracker.initialize(frame, box_xywh)`` then ``tracker.track(frame) -> (4,) float64 xywh`` per frame; frames
are numpy (H, W[, C]) RGB (gray and RGBA accepted) or torch (C, H, W); boxes are xywh in image pixels.

Internally the state follows pytracking's conventions: the target position ``pos`` is (y, x) in image pixels
with pixel centres at integer coordinates (a box x, y, w, h has its centre at (y + (h - 1) / 2,
x + (w - 1) / 2)), sizes are (h, w), and ``target_scale`` is image pixels per crop pixel.

Per frame: a search crop at the current position and scale (:mod:`.patches`), backbone, classification scores,
localisation (:mod:`.localize`), box refinement by gradient ascent on the box head's f(x, y) (:mod:`.refine`),
and the sample-memory update (:mod:`.memory`) with periodic filter optimisation by the network's own filter
optimizer. The first frame's training samples come from :mod:`.init_augment`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ltr.models.target_classifier import softmax_reg
from ltr.models.tracking import CLF_LAYER, DiMPNet
from pytracking.tracker.dimp.frames import (
    check_frame_size,
    frame_pixels,
    frame_to_tensor,
    input_frame_wh,
    validate_frame,
    validate_init_box,
)
from pytracking.tracker.dimp.init_augment import feature_dropout, generate_init_patches
from pytracking.tracker.dimp.localize import (
    HARD_NEGATIVE,
    NOT_FOUND,
    UNCERTAIN,
    Localization,
    LocalizationThresholds,
)
from pytracking.tracker.dimp.lockstep import FrameCrop, track_frames
from pytracking.tracker.dimp.memory import SampleMemory
from pytracking.tracker.dimp.params import DiMPParams, Geometry
from pytracking.tracker.dimp.precision import convolution_precision
from pytracking.tracker.dimp.stages import network_stages
from pytracking.tracker.dimp.state_boxes import box_in_crop, target_boxes
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer


class DiMPTracker:
    """DiMP tracker (DiMP-50, SuperDiMP, PrDiMP-50, DiMP-NCE+ by parameter set); see the module docstring.

    Args:
        net: a :class:`DiMPNet` in eval mode (``pytracking.tracker.dimp.network`` prepares one).
        geometry: the crop geometry of the network's train setting.
        params: runtime parameters.
        timer: optional :class:`StageTimer` (stages crop, backbone, classifier, localisation, refinement
            (the ascent), selection (the refined box taken), update).
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
        self.geometry = geometry
        self.params = params
        self.timer = timer or NULL_TIMER
        self.device = next(net.parameters()).device
        self.thresholds = LocalizationThresholds(
            params.target_not_found_threshold,
            params.distractor_threshold,
            params.hard_negative_threshold,
            params.target_neighborhood_scale,
            params.displacement_scale,
        )
        self._mean = torch.tensor(geometry.normalize_mean, device=self.device).reshape(1, 3, 1, 1)
        self._std = torch.tensor(geometry.normalize_std, device=self.device).reshape(1, 3, 1, 1)
        #: the random draws of initialisation (shifts, dropout) and of the refinement's candidate boxes
        self.generator = torch.Generator().manual_seed(params.seed)
        #: every network call goes through here (:mod:`.stages`: eager, compiled or ONNX Runtime)
        self.stages = network_stages(net, geometry, params)
        self.frame_num = 0
        #: values of the last frame for visualisation and tests (see :meth:`track`)
        self.debug_info: dict[str, Any] = {}

    # ------------------------------------------------------------------------------------------------ helpers
    def normalize(self, patches: Tensor) -> Tensor:
        """(N, 3, h, w) pixel values 0..255 -> network input (ImageNet normalisation, the reference's order;
        one new tensor, the later steps in place: a batch of crops is larger than the caches)."""
        return (patches / 255).sub_(self._mean).div_(self._std)

    def _image(self, frame: np.ndarray | Tensor) -> Tensor:
        return frame_to_tensor(frame, self.device)[None]

    def set_scale(self, new_scale: Tensor) -> None:
        """Set ``target_scale`` (clamped to the sequence's range) and the target size it implies."""
        self.target_scale = new_scale.clamp(self.min_scale_factor, self.max_scale_factor)
        self.target_sz = self.base_target_sz * self.target_scale

    def preprocess_scores(self, raw: Tensor) -> Tensor:
        """(B, H', W') raw classifier scores -> the maps localisation uses (softmax for PrDiMP)."""
        if self.params.score_preprocess == "softmax":
            reg = getattr(self.net.classifier.optimizer, "softmax_reg", None)
            return softmax_reg(raw, dim=(-2, -1), reg=reg)
        return raw

    # ------------------------------------------------------------------------- one frame, step by step
    # :func:`.lockstep.track_frames` runs these for one or many trackers, batching the network calls between
    # them; :meth:`track` is that for one tracker.
    def check_frame(self, frame: np.ndarray | Tensor) -> None:
        """Raise unless ``frame`` can be the next frame (``FrameSizeError``: not the first frame's size)."""
        if self.frame_num == 0:
            raise RuntimeError("DiMPTracker.track called before initialize")
        check_frame_size(frame, self._frame_wh, index=self.frame_num)

    def begin_frame(self, frame: np.ndarray | Tensor) -> Tensor:
        """Start the next frame (checked by :meth:`check_frame`): seed its draws and return its pixels
        (1, 3, H, W) on the tracker's device (uint8 or float32), which :func:`.lockstep.track_frames` crops."""
        self.frame_num += 1
        # a frame's random draws (the refinement's candidates) depend on (seed, frame) only
        self.generator.manual_seed(self.params.seed + 1_000_003 * self.frame_num)
        # the frame has the first frame's size (check_frame), so image_sz set at initialisation holds
        return frame_pixels(frame, self.device)[None]

    def candidate_draws(self) -> Tensor:
        """The frame's ``num_random_boxes`` draws (num_random_boxes, 4) for the refinement's jittered
        candidates (uniform [0, 1), CPU; :func:`.refine.candidate_boxes`)."""
        return torch.rand(self.params.num_random_boxes, 4, generator=self.generator)

    def learn(self, loc: Localization) -> tuple[float | None, int]:
        """The frame's learning decisions: the learning rate of the new sample the sample memory takes
        (None: none; the sample is the frame's classification features with the target's box in the crop)
        and the number of filter optimizer steps (0: none). :func:`.lockstep.track_frames` adds the samples
        and runs the steps for all trackers at once."""
        p = self.params
        lr, steps = None, 0
        if loc.state not in (NOT_FOUND, UNCERTAIN):
            hard = loc.state == HARD_NEGATIVE
            if hard or self.frame_num % p.train_sample_interval == 0:
                lr = p.hard_negative_learning_rate if hard else p.learning_rate
            if hard:
                steps = p.hard_negative_optim_iter
            elif (self.frame_num - 1) % p.train_skipping == 0:
                steps = p.update_optim_iter
        # the reference restores the last refined position, also one from an earlier frame when this
        # frame's refinement kept no box
        if p.refine and loc.state != NOT_FOUND and self.pos_refined is not None:
            self.pos = self.pos_refined.clone()
        return lr, steps

    def end_frame(self, crop: FrameCrop, loc: Localization, refine_boxes: Tensor | None) -> None:
        """Set ``debug_info`` (see :meth:`track`); ``refine_boxes``: the refined candidates (S, 4) xywh image
        pixels, or None without a refined box."""
        self.debug_info = {
            "state": loc.state,
            "scores": loc.scores,
            "max_score": loc.max_score,
            "sample_coords": crop.coords,
            "refine_boxes": refine_boxes,
        }

    def target_box(self) -> np.ndarray:
        """The current target state as a box (4,) float64 xywh in image pixels (what :meth:`track` returns)."""
        return target_boxes(self.pos, self.target_sz)

    # ------------------------------------------------------------------------------------------------ API
    @torch.no_grad()
    def initialize(self, frame: np.ndarray | Tensor, box_xywh: Any) -> None:
        """Start tracking the target ``box_xywh`` (4 numbers, xywh image pixels, w and h > 0, overlapping the
        frame) in ``frame``; bad input raises ``frames.TrackerInputError`` (a ValueError) saying why."""
        validate_frame(frame)
        self._frame_wh = input_frame_wh(frame)
        box = torch.tensor(validate_init_box(box_xywh, self._frame_wh).tolist(), dtype=torch.float32)
        with convolution_precision(self.params.tf32):
            self._initialize(self._image(frame), box)

    def _initialize(self, im: Tensor, box: Tensor) -> None:
        geo, p = self.geometry, self.params
        self.generator.manual_seed(p.seed)  # same sequence, same result, also when re-initialised
        self.frame_num = 1
        self.pos = torch.stack([box[1] + (box[3] - 1) / 2, box[0] + (box[2] - 1) / 2])
        self.target_sz = torch.stack([box[3], box[2]])
        self.image_sz = torch.tensor([float(im.shape[2]), float(im.shape[3])])
        self.img_sample_sz = torch.tensor([float(geo.crop_size), float(geo.crop_size)])
        search_area = torch.prod(self.target_sz * geo.search_area_factor).item()
        self.target_scale = torch.tensor(math.sqrt(search_area)) / self.img_sample_sz.prod().sqrt()
        self.base_target_sz = self.target_sz / self.target_scale
        self.min_scale_factor = torch.max(10 / self.base_target_sz)
        self.max_scale_factor = torch.min(self.image_sz / self.base_target_sz)

        init = generate_init_patches(
            im,
            self.pos,
            self.target_scale,
            self.img_sample_sz,
            p.augmentation,
            border_mode=geo.crop_mode,
            max_scale_change=geo.max_scale_change,
            generator=self.generator,
        )
        feats = self.stages.init_backbone(self.normalize(init.patches.to(self.device)))

        # classifier: augmented samples (+ dropout copies of the first), their boxes, filter, memory
        clf = self.stages.init_clf_features(feats[CLF_LAYER])
        transforms = list(init.transforms)
        aug = p.augmentation
        if aug.dropout_num > 0:
            transforms += transforms[:1] * aug.dropout_num
            clf = torch.cat(
                [clf, feature_dropout(clf[:1], aug.dropout_num, aug.dropout_prob, self.generator)]
            )
        self.feature_sz = torch.tensor([float(clf.shape[-2]), float(clf.shape[-1])])
        self.kernel_size = torch.tensor([float(self.net.classifier.filter_size)] * 2)
        classifier_box = box_in_crop(
            self.pos, self.target_sz, init.init_sample_pos, init.init_sample_scale, self.img_sample_sz
        )
        boxes = torch.stack(
            [classifier_box + torch.tensor([t.shift[1], t.shift[0], 0.0, 0.0]) for t in transforms]
        )
        self.filter = self.stages.initial_filter(clf, boxes.to(self.device), p.init_optim_iter)
        self.memory = SampleMemory(p.memory_size, init_min_weight=p.init_samples_min_weight)
        self.memory.initialize(clf, boxes)

        # box head: modulation vectors from the un-augmented sample
        ref_box = (
            classifier_box + torch.tensor([transforms[0].shift[1], transforms[0].shift[0], 0.0, 0.0])
        ).to(self.device)
        self.modulation = self.stages.modulation({n: f[:1] for n, f in feats.items()}, ref_box[None])
        #: the last refined position (y, x), which learn() restores after the frame (the reference's rule)
        self.pos_refined: Tensor | None = None
        self.debug_info = {"init_patches": init.patches, "init_boxes": boxes}

    @torch.no_grad()
    def track(self, frame: np.ndarray | Tensor) -> np.ndarray:
        """Track one frame; returns the target box (4,) float64 xywh in image pixels.

        ``debug_info`` then holds: ``state`` (a :data:`.localize.STATES` name), ``scores`` (H', W') the map
        localisation used, ``max_score``, ``sample_coords`` (4,) the crop's [y1, x1, y2, x2] in image pixels,
        ``refine_boxes`` (S, 4) xywh image pixels of the refined candidates (None without a refined box).
        """
        return track_frames([self], [frame], timer=self.timer)[0]
