"""The DiMP tracker with energy-based box refinement (DiMP-NCE+ at runtime).

``tracker.initialize(frame, box_xywh)`` then ``tracker.track(frame) -> (4,) float64 xywh`` per frame; frames
are numpy (H, W[, C]) RGB (gray and RGBA accepted) or torch (C, H, W); boxes are xywh in image pixels.

Per frame: search crop at the current position and scale with the shared crop function
(:func:`ltr.data.crop.sample_target_crops`), backbone, classification scores, localisation
(:mod:`.localize`), box refinement (:mod:`.refine`), sample-memory update (:mod:`.memory`) and periodic
filter optimisation with the network's own steepest-descent optimizer.

Host synchronisation (``params.sync_free``): the state stays on the device as tensors, and the crop is
placed with the host copy of the previous output box. Sync-free (the default on CUDA), a frame reads nothing
back but its output box: the localisation state masks instead of branching (refinement always runs and its
result is dropped when the target is not found; the memory update is masked; a hard-negative filter step runs
every frame and is kept only on hard negatives). Otherwise (the default on a CPU, where a read costs nothing)
the state is read once and the frame skips the work it does not need. The refinement window is sized from
the host box and placed on the device (on a CPU, where the branching path also reads the window's corner,
with host numbers); the refinement scores boxes and takes their gradients in closed form
(:class:`ltr.models.box_score_grad.BoxScorer`, no autograd; on a CPU's branching path its pooling runs in a
C++ kernel and reads the boxes' cells on the host, elsewhere it reads nothing back). Everything runs under
``torch.inference_mode`` with the weights frozen: it skips the per-operation autograd bookkeeping that
``torch.no_grad`` keeps (up to about 1 ms of a CPU frame of small operations; ``benchmarks/tracker_fps.py
--compare-no-grad``). The tracker's state tensors are therefore inference tensors, to be changed in place
only under ``torch.inference_mode``.

CUDA graph (``params.cuda_graph``, on by default on CUDA): the refinement is recorded once per tracker and
replayed every frame (:mod:`.graphs`), on the whole maps (a graph needs fixed shapes), with the candidates'
random draws made before the replay; on a GPU it is otherwise bound by the host launching its small kernels.

Refinement window (``params.refine_window``, not used by the CUDA graph): the box head's test features (two
3x3 convolutions per level, about 60% of a ResNet-50 backbone's work at the SuperDiMP geometry) are computed
only on the cells that boxes within ``refine_window`` x sqrt(w h) of the classifier box can read, and the
boxes are kept in that region during the ascent; inside it the scores are exactly those on the whole maps
(``refine_window=None``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ltr.data.crop import crop_region
from ltr.models.box_score_grad import BoxScorer, BoxValueAndGrad
from ltr.models.target_classifier import apply_filter, score_cell_to_pixel
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, DiMPNet
from ltr.ops import box_pool_kernel
from ltr.ops.int8_conv import int8_available
from pytracking.tracker.dimp.augment import augmented_samples, feature_dropout
from pytracking.tracker.dimp.compiled import compiled_stage
from pytracking.tracker.dimp.frames import crop_frame, frame_size_wh, prepare_frame, upload
from pytracking.tracker.dimp.graphs import GraphedFunction
from pytracking.tracker.dimp.int8 import Int8Heads
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
from pytracking.tracker.dimp.refine import RefineResult, jitter_draws, refine_box
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer

#: the refinement window: (4,) xyxy crop-pixel tensor and host upper bounds (w, h) of its extent
Window = tuple[Tensor, tuple[float, float]]


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
        self.sync_free = params.sync_free if params.sync_free is not None else self.device.type == "cuda"
        #: the refinement replayed as a CUDA graph (on a CPU: the same fixed-shape path without one)
        self.graphed = params.refines_in_graph(self.device.type)
        #: the graphed and sync-free paths read nothing on the host (on a CPU they test the CUDA data flow), so
        #: their box scorers pool with PyTorch products over the whole maps, without the CPU's cell restriction
        #: and C++ kernel (both read values on the host)
        self._host_free_scoring = self.graphed or self.sync_free
        self._refine_graph: GraphedFunction | None = None
        self.generator = torch.Generator().manual_seed(params.seed)
        #: the refinement's random boxes are drawn on the device (a CPU draw would have to be uploaded)
        self.box_generator = torch.Generator(device=self.device)
        # the per-frame stages (fixed shapes); initialisation's batch of crops runs the modules eagerly
        self._backbone: Callable[[Tensor], dict[str, Tensor]] = net.backbone
        self._clf_features: Callable[[Tensor], Tensor] = net.classifier.feature_head
        if params.compile:
            self._backbone = compiled_stage(net.backbone, "backbone")
            self._clf_features = compiled_stage(net.classifier.feature_head, "classifier feature head")
        #: initialisation's classifier features: the module, or the int8 heads (the same numbers as frames)
        self._clf_init_features: Callable[[Tensor], Tensor] = net.classifier.extract_features
        self._int8: Int8Heads | None = None
        if params.int8_heads:
            if self.device.type == "cpu" and int8_available():
                self._int8 = Int8Heads(net)
                self._clf_features = self._clf_init_features = self._int8.classifier_features
            else:
                warnings.warn(
                    f"int8_heads: no oneDNN int8 convolution on {self.device} in this torch build; the heads "
                    "run in float32",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if self.device.type == "cpu" and params.refine and not self._host_free_scoring:
            # builds the refinement's pooling kernel (once, cached on disk) before the first frame
            box_pool_kernel.available()
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

    def _crop_side(self, host_box: np.ndarray, host_wh: tuple[int, int]) -> float:
        """The side (image px) of the frame's crop region around the host box (4,) xywh, on the host."""
        geo = self.geometry
        region = crop_region(
            host_box.reshape(1, 4),
            geo.search_area_factor,
            host_wh,
            mode=geo.crop_mode,
            max_scale_change=geo.max_scale_change,
        )
        return float(region[0, 2])

    def _refine_window(
        self, position: Tensor, size: Tensor, host_box: np.ndarray, side: float
    ) -> Window | None:
        """The refinement window around the classifier box (centre ``position`` (2,), size ``size`` (2,), crop
        px): a (4,) xyxy crop-pixel tensor, widened by ``refine_window`` x sqrt(w h) on every side, and host
        bounds (w, h) of its extent from the host box (4,) xywh image px and the side of the frame's crop
        region (:meth:`_crop_side`); None when refinement is off or uses the whole maps."""
        margin = self.params.refine_window
        if not self.params.refine or margin is None:
            return None
        geo = self.geometry
        host_size = np.maximum(host_box[2:], 0.0) * (geo.crop_size / side)  # crop px
        half = 0.5 * host_size + margin * np.sqrt(host_size.prod())
        # the device size is this one up to float32 rounding and the numpy crop's rounding of the region to
        # whole pixels (its side moves by at most 1 px): a relative 1% + 2/side and 1 px cover both
        slack = 1.01 + 2.0 / max(side, 1.0)
        extent = (float(2 * slack * half[0] + 1.0), float(2 * slack * half[1] + 1.0))
        half_t = 0.5 * size + margin * torch.sqrt(size.prod().clamp(min=0))
        return torch.cat([position - half_t, position + half_t]).nan_to_num(0.0), extent

    def _box_scorer(
        self, feats: list[Tensor], window: Window | None, modulation: tuple[Tensor, Tensor]
    ) -> tuple[Callable[[Tensor], Tensor], BoxValueAndGrad, Tensor | None]:
        """The refinement's score function (1, S, 4) xywh crop px -> (1, S), the same with its box gradient
        (-> ((1, S), (1, S, 4)), closed form, no autograd) and the (4,) xyxy bounds the boxes must stay in for
        them to be exact (None without a window: no bounds). ``modulation``: the box head's ((1, M2), (1, M3))
        reference vectors."""
        head = self.net.box_head
        conv2d = None if self._int8 is None else self._int8.conv2d
        bounds = None
        if window is not None:
            # on a CPU the branching path reads the state on the host anyway: the window's corner too (a view,
            # no gathering, when it lies inside the maps; on a GPU the bounds would be blocking uploads)
            host = self.device.type == "cpu" and not self.sync_free
            part = head.get_test_features_window(feats, *window, conv2d=conv2d, host_reads=host)
            test = part.feats
            shift = torch.cat([part.origin, part.origin.new_zeros(2)]).float()
            bounds = part.valid_xyxy.float()
        else:
            test = head.get_test_features(feats, conv2d=conv2d)
            shift = torch.zeros(4, device=self.device)
        # any memory layout: BoxScorer takes each map as (H, W, C) for its kernel (a view of channels_last
        # maps) or copies it to (W, H * C) for its PyTorch path
        modulated = tuple(head.modulate(modulation, test))
        # the head must be in eval mode; with int8 heads the ascent's per-box Linear products are int8 too
        scorer = BoxScorer(
            head,
            modulated,
            int8=self._int8 is not None and self._int8.box_layers,
            restrict_cells=False if self._host_free_scoring else None,
            kernel=False if self._host_free_scoring else None,
        )

        def score_fn(boxes: Tensor) -> Tensor:
            return scorer.score(boxes - shift)

        def value_and_grad(boxes: Tensor) -> tuple[Tensor, Tensor]:
            return scorer(boxes - shift)  # d f / d boxes = d f / d (boxes - shift): the shift is a constant

        return score_fn, value_and_grad, bounds

    def _refine(
        self,
        feats: list[Tensor],
        window: Window | None,
        classifier_box: Tensor,
        *,
        modulation: tuple[Tensor, Tensor] | None = None,
        draws: Tensor | None = None,
    ) -> RefineResult:
        """Refine ``classifier_box`` (4,) xywh crop px on the box-layer features, eagerly. ``modulation``:
        default the tracker's; ``draws``: the candidates' random draws (:func:`jitter_draws`), default drawn
        from the box generator."""
        p = self.params
        score_fn, value_and_grad, bounds = self._box_scorer(feats, window, modulation or self.modulation)
        return refine_box(
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
            generator=self.box_generator,
            bounds_xyxy=bounds,
            box_value_and_grad=value_and_grad,
            draws=draws,
        )

    def _refine_graphed(self, feats: list[Tensor], classifier_box: Tensor) -> RefineResult:
        """:meth:`_refine` on the whole maps, replayed from a graph recorded on the first call. Its inputs
        (fixed shapes): the box-layer features, the modulation, the box and the random draws, which are drawn
        here, outside the graph. The returned tensors are overwritten by the next frame's replay."""
        draws = jitter_draws(self.params.num_random_boxes, self.box_generator)
        inputs = (*feats, *self.modulation, classifier_box, draws)
        if self._refine_graph is None:

            def refine_whole_maps(
                f2: Tensor, f3: Tensor, m2: Tensor, m3: Tensor, box: Tensor, u: Tensor
            ) -> tuple[Tensor, ...]:
                return tuple(self._refine([f2, f3], None, box, modulation=(m2, m3), draws=u))

            self._refine_graph = GraphedFunction(
                refine_whole_maps, inputs, capture=self.device.type == "cuda"
            )
        return RefineResult(*self._refine_graph(*inputs))

    def _optimize(self, num_iter: int) -> list[Tensor]:
        """Run the filter optimiser from the current filter; returns its iterates (num_iter + 1 filters)."""
        feats, boxes, weights = self.memory.filled()
        result = self.net.classifier.optimizer(
            self.filter, feats[:, None], boxes[:, None], sample_weight=weights[:, None], num_iter=num_iter
        )
        self.filter = result.filters
        return result.iterates

    def _update_masked(self, state: Tensor, clf: Tensor, sample_box: Tensor) -> None:
        """The memory update and filter optimisation of the branching path, masked by the device ``state``.

        A hard negative takes ``hard_negative_optim_iter`` steps, a normal sample on every
        ``train_skipping``-th frame ``update_optim_iter``; the optimiser is stateless, so one run of the larger
        count gives both as iterates.
        """
        p = self.params
        hard = state == HARD_NEGATIVE
        learn = hard | (state == NORMAL)
        lr = torch.where(hard, p.hard_negative_learning_rate, p.learning_rate)
        self.memory.add(clf, sample_box, lr, learn)
        old = self.filter
        if (self.frame_num - 1) % p.train_skipping == 0:
            its = self._optimize(max(p.hard_negative_optim_iter, p.update_optim_iter))
            keep = torch.where(learn, its[p.update_optim_iter], old)
        else:
            its = self._optimize(p.hard_negative_optim_iter)
            keep = old
        self.filter = torch.where(hard, its[p.hard_negative_optim_iter], keep)

    # ------------------------------------------------------------------------------------------------ API
    @torch.inference_mode()
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
        self._host_box = self._box().double().cpu().numpy()  # where the next crop goes
        samples = augmented_samples(
            image,
            self._box(),
            crop_size=geo.crop_size,
            search_area_factor=geo.search_area_factor,
            aug=p.augmentation,
            generator=self.generator,
        )
        feats = self.net.backbone(self._normalize(samples.crops))
        clf = self._clf_init_features(feats[CLF_LAYER])
        drop = feature_dropout(
            clf[:1], p.augmentation.dropout_copies, p.augmentation.dropout_prob, self.generator
        )
        clf = torch.cat([clf, drop])
        boxes = torch.cat([samples.boxes, samples.boxes[:1].expand(drop.shape[0], 4)])
        self.memory = SampleMemory(
            p.memory_size, init_min_weight=p.init_samples_min_weight, sync_free=self.sync_free
        )
        self.memory.initialize(clf, boxes)
        self.filter = self.net.classifier.initial_filter(clf[:, None], boxes[:, None])
        self._optimize(p.init_optim_iter)
        ref = [feats[n][:1] for n in BOX_LAYERS]
        self.modulation = self.net.box_head.get_modulation(ref, samples.boxes[:1])
        self.frame_num = 1
        self.debug_info = {"init_crops": samples.crops, "init_boxes": samples.boxes}

    @torch.inference_mode()
    def track(self, frame: np.ndarray | Tensor) -> np.ndarray:
        """Track one frame; returns the target box (4,) float64 xywh in image pixels."""
        if self.frame_num == 0:
            raise RuntimeError("DiMPTracker.track called before initialize")
        self.frame_num += 1
        geo, p, t = self.geometry, self.params, self.timer
        # the refinement's random boxes depend on (seed, frame) only, not on which earlier frames refined:
        # the branching and the sync-free paths draw the same boxes
        self.box_generator.manual_seed(p.seed + 1_000_003 * self.frame_num)
        with t.stage("crop"):
            image = prepare_frame(frame, self.device)
            host_wh = frame_size_wh(image)
            self.image_wh = upload(host_wh, self.device, torch.float32)
            crop, tf = crop_frame(
                image,
                self._host_box if isinstance(image, np.ndarray) else self._box(),
                geo.search_area_factor,
                geo.crop_size,
                mode=geo.crop_mode,
                max_scale_change=geo.max_scale_change,
                device=self.device,
            )
            scale, offset = tf.scale[0], tf.offset[0]
            x = self._normalize(crop)
            # the window's host bound needs the crop's side: taken here, where the crop just computed the
            # same region (after the backbone, with cold caches, the same call took ~8x longer)
            windowed = p.refine and p.refine_window is not None and not self.graphed
            side = self._crop_side(self._host_box, host_wh) if windowed else 0.0
        with t.stage("backbone"):
            feats = self._backbone(x)
        with t.stage("classifier"):
            clf = self._clf_features(feats[CLF_LAYER])  # (1, C, h, w)
            scores = apply_filter(clf[:, None], self.filter)[0, 0]  # (H', W')
        with t.stage("localisation"):
            size_crop = self.size * scale
            loc = localize(
                scores,
                (self.centre - offset) * scale,
                size_crop,
                cell_to_pixel=self.cell_to_pixel,
                thresholds=self.thresholds,
                window_strength=p.score_window,
            )
            window = (
                None if self.graphed else self._refine_window(loc.position, size_crop, self._host_box, side)
            )
            # branching mode: the state's host read (on a CPU the window's corner is read as well); sync-free:
            # the state stays a device tensor
            state = loc.state if self.sync_free else int(loc.state)
        refined = None
        if self.sync_free or state != NOT_FOUND:
            classifier_box = torch.cat([loc.position - 0.5 * size_crop, size_crop])
            with t.stage("refinement"):
                if p.refine:
                    box_feats = [feats[n] for n in BOX_LAYERS]
                    if self.graphed:
                        refined = self._refine_graphed(box_feats, classifier_box)
                    else:
                        refined = self._refine(box_feats, window, classifier_box)
                    box_crop = refined.box
                else:
                    box_crop = classifier_box
                centre = (box_crop[:2] + 0.5 * box_crop[2:]) / scale + offset
                size = box_crop[2:] / scale
                if not p.update_scale_when_uncertain:
                    size = torch.where(loc.state == UNCERTAIN, self.size, size)
                ok = torch.isfinite(centre).all() & torch.isfinite(size).all() & (size > 0).all()
                ok = ok & (loc.state != NOT_FOUND)
                centre, size = self._clamp_state(
                    torch.where(ok, centre, self.centre), torch.where(ok, size, self.size)
                )
                self.centre, self.size = centre, size
        with t.stage("update"):
            sample_box = torch.cat([(self.centre - 0.5 * self.size - offset) * scale, self.size * scale])
            if self.sync_free:
                self._update_masked(loc.state, clf, sample_box)
            elif state in (NORMAL, HARD_NEGATIVE):
                hard = state == HARD_NEGATIVE
                lr = p.hard_negative_learning_rate if hard else p.learning_rate
                self.memory.add(clf, sample_box, lr)
                if hard:
                    self._optimize(p.hard_negative_optim_iter)
                elif (self.frame_num - 1) % p.train_skipping == 0:
                    self._optimize(p.update_optim_iter)
        self.debug_info = {
            "scores": loc.scores,  # what localisation decided on (with the motion prior, if any)
            "state": state,
            "crop_transform": tf,
            "refine_boxes": None
            if refined is None
            else refined.boxes / scale + torch.cat([offset, 0 * offset]),
        }
        out = self._box().double().cpu().numpy()  # the frame's one host read
        self._host_box = out.copy()
        return out
