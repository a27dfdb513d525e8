"""Runtime parameters of the DiMP tracker (a dataclass) and the crop geometry it shares with training.

The crop geometry (crop size, search area factor, feature stride, border mode, maximum scale change, input
normalisation) is NOT a tracker parameter: it is read from the network's saved train config
(:func:`geometry_from_train_config`) so tracker and training crop the same way by construction. In
pytracking's terms: ``image_sample_size`` = crop size, ``search_area_scale`` = search area factor,
``border_mode`` = crop mode, ``patch_max_scale_change`` = maximum scale change.

The defaults are pytracking's SuperDiMP parameter set; the field comments give pytracking's names where they
differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ltr.data.crop import CROP_MODES
from pytracking.tracker.dimp.init_augment import InitAugmentation


@dataclass(frozen=True)
class Geometry:
    """Crop geometry shared with the train setting (``ltr.data.config.DataConfig``)."""

    crop_size: int = 352
    search_area_factor: float = 6.0
    feature_stride: int = 16
    crop_mode: str = "inside_major"
    max_scale_change: float | None = 1.5
    normalize_mean: tuple[float, ...] = (0.485, 0.456, 0.406)
    normalize_std: tuple[float, ...] = (0.229, 0.224, 0.225)

    def __post_init__(self) -> None:
        if self.crop_mode not in CROP_MODES:
            raise ValueError(f"Geometry.crop_mode must be one of {CROP_MODES}, got {self.crop_mode!r}")
        if self.crop_size < self.feature_stride or self.crop_size % self.feature_stride:
            raise ValueError(
                f"Geometry.crop_size ({self.crop_size}) must be a positive multiple of feature_stride "
                f"({self.feature_stride})"
            )


def geometry_from_train_config(config: dict[str, Any]) -> Geometry:
    """The :class:`Geometry` in a plain train config (``to_dict(DiMPTrainConfig)``, as saved in checkpoints).

    Raises ``KeyError`` naming the missing key when the config has no ``data`` section or geometry field.
    """
    data = config.get("data")
    if not isinstance(data, dict):
        raise KeyError("train config has no 'data' section (the crop geometry lives in config['data'])")
    try:
        msc = data["max_scale_change"]
        return Geometry(
            crop_size=int(data["crop_size"]),
            search_area_factor=float(data["search_area_factor"]),
            feature_stride=int(data["feature_stride"]),
            crop_mode=str(data["crop_mode"]),
            max_scale_change=None if msc is None else float(msc),
            normalize_mean=tuple(float(v) for v in data.get("normalize_mean", Geometry.normalize_mean)),
            normalize_std=tuple(float(v) for v in data.get("normalize_std", Geometry.normalize_std)),
        )
    except KeyError as err:
        raise KeyError(f"train config['data'] lacks the geometry key {err.args[0]!r}") from None


@dataclass(frozen=True)
class DiMPParams:
    """Everything the DiMP tracker needs besides the network and its geometry.

    ``train_setting`` names the ``dimp/<setting>`` train setting whose latest checkpoint is the default
    network and whose config gives the geometry of a freshly built (random-weight) network; None for the
    imported pytracking models, whose network must be given (``--net``).
    """

    train_setting: str | None = "nce_plus"
    # initialisation
    augmentation: InitAugmentation = field(default_factory=InitAugmentation)
    init_optim_iter: int = 10  # net_opt_iter
    # sample memory and classifier updates
    memory_size: int = 50  # sample_memory_size
    learning_rate: float = 0.01
    init_samples_min_weight: float = 0.25  # init_samples_minimum_weight
    train_skipping: int = 20
    train_sample_interval: int = 1
    update_optim_iter: int = 2  # net_opt_update_iter
    hard_negative_optim_iter: int = 1  # net_opt_hn_iter
    hard_negative_learning_rate: float = 0.02
    # localisation
    score_preprocess: Literal["none", "softmax"] = "none"
    advanced_localization: bool = True
    target_not_found_threshold: float = 0.25
    distractor_threshold: float = 0.8
    hard_negative_threshold: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8  # dispalcement_scale
    update_scale_when_uncertain: bool = True
    #: the target centre is kept inside the image up to ``(0.5 - ratio)`` of the target size beyond its edges
    target_inside_ratio: float = 0.2
    #: our option, off in the reference sets: the scores are multiplied by (1 - s) + s x a Hann window
    #: centred on the previous position (``localize.motion_window``); 0 = none
    score_window: float = 0.0
    # box refinement by gradient ascent on the box head's f(x, y)
    refine: bool = True  # use_iou_net
    refine_space: Literal["default", "relative"] = "relative"  # box_refinement_space
    #: "plain": the reference's fixed-step ascent; "s1": the paper's Algorithm S1 (our option)
    refine_mode: Literal["plain", "s1"] = "plain"
    refine_iters: int = 10  # box_refinement_iter
    refine_step: float = 2.5e-3  # box_refinement_step_length
    #: plain: the step is multiplied by this after every iteration; s1: after a rejected step
    refine_decay: float = 1.0  # box_refinement_step_decay
    num_random_boxes: int = 9  # num_init_random_boxes
    box_jitter_pos: float = 0.1
    box_jitter_size: float = 0.5  # box_jitter_sz
    max_aspect_ratio: float = 6.0  # maximal_aspect_ratio
    refine_top_k: int = 3  # iounet_k
    #: our option (1 = the reference: the refined size replaces the previous one): the new size is the
    #: geometric blend previous^(1 - rate) x refined^rate per side, which damps the size noise of a weak box head
    scale_learning_rate: float = 1.0
    #: our option (None = ``scale_learning_rate``, as the per-side blend): the rate of the aspect ratio w / h
    #: alone, with ``scale_learning_rate`` then that of the scale sqrt(w h): each moves geometrically by its own
    #: rate towards the refined box's, so a box head whose aspect is noisier than its scale can be damped more
    aspect_learning_rate: float | None = None
    # runtime
    #: torch.compile the per-frame backbone, classifier feature head and box score (:mod:`.compiled`); falls back to
    #: eager with a warning where compilation fails
    compile: bool = False
    #: CUDA: the refinement's plain ascent (all ``refine_iters`` steps, forward and backward) captured as one
    #: CUDA graph per batch size and replayed (:mod:`.graphed`): one launch instead of hundreds per frame; no
    #: effect on a CPU or with ``refine_mode="s1"``
    cuda_graph: bool = False
    #: CUDA: let cuDNN's convolutions use TF32 (:mod:`.precision`); off, they run in full float32, so that a
    #: sequence's boxes do not depend on the batch it was tracked in (``--batch``)
    tf32: bool = False
    #: who runs the networks (:mod:`.stages`): "torch" (this process's modules), or "onnxruntime" (the models
    #: ``python -m pytracking.export_onnx`` wrote to ``onnx_dir`` for this network and parameter set; CPU)
    backend: Literal["torch", "onnxruntime"] = "torch"
    onnx_dir: str | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.refine_mode not in ("plain", "s1"):
            raise ValueError(f"DiMPParams.refine_mode must be 'plain' or 's1', got {self.refine_mode!r}")
        if self.refine_space not in ("default", "relative"):
            raise ValueError(
                f"DiMPParams.refine_space must be 'default' or 'relative', got {self.refine_space!r}"
            )
        if self.score_preprocess not in ("none", "softmax"):
            raise ValueError(
                f"DiMPParams.score_preprocess must be 'none' or 'softmax', got {self.score_preprocess!r}"
            )
        if self.memory_size < self.augmentation.num_samples:
            raise ValueError(
                f"DiMPParams.memory_size ({self.memory_size}) must hold the "
                f"{self.augmentation.num_samples} initial samples"
            )
        if not 0.0 < self.learning_rate < 1.0 or not 0.0 < self.hard_negative_learning_rate < 1.0:
            raise ValueError("DiMPParams learning rates must be in (0, 1)")
        if not 0.0 <= self.score_window <= 1.0:
            raise ValueError(f"DiMPParams.score_window must be in [0, 1], got {self.score_window!r}")
        if self.compile not in (True, False):
            raise ValueError(f"DiMPParams.compile must be True or False, got {self.compile!r}")
        if self.cuda_graph not in (True, False):
            raise ValueError(f"DiMPParams.cuda_graph must be True or False, got {self.cuda_graph!r}")
        if self.tf32 not in (True, False):
            raise ValueError(f"DiMPParams.tf32 must be True or False, got {self.tf32!r}")
        if self.backend not in ("torch", "onnxruntime"):
            raise ValueError(f"DiMPParams.backend must be 'torch' or 'onnxruntime', got {self.backend!r}")
        if not 0.0 < self.scale_learning_rate <= 1.0:
            raise ValueError(
                f"DiMPParams.scale_learning_rate must be in (0, 1], got {self.scale_learning_rate!r}"
            )
        if self.aspect_learning_rate is not None and not 0.0 <= self.aspect_learning_rate <= 1.0:
            raise ValueError(
                f"DiMPParams.aspect_learning_rate must be None or in [0, 1], got {self.aspect_learning_rate!r}"
            )
        if self.refine_top_k < 1 or self.num_random_boxes < 0:
            raise ValueError("DiMPParams: refine_top_k must be >= 1 and num_random_boxes >= 0")
