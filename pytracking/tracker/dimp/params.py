"""Runtime parameters of the DiMP tracker (a dataclass) and the crop geometry it shares with training.

The crop geometry (crop size, search area factor, feature stride, border mode, maximum scale change, input
normalisation) is NOT a tracker parameter: it is read from the network's saved train config
(:func:`geometry_from_train_config`) so tracker and training crop the same way by construction.

Defaults are the SuperDiMP / PrDiMP runtime values (``/work/shared/docs/reference-dimp.md`` section 3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ltr.data.crop import CROP_MODES


@dataclass(frozen=True)
class Geometry:
    """Crop geometry shared with the train setting (``ltr.data.config.DataConfig``)."""

    crop_size: int = 352
    search_area_factor: float = 6.0
    feature_stride: int = 16
    crop_mode: str = "inside_major"
    max_scale_change: float = 1.5
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
        return Geometry(
            crop_size=int(data["crop_size"]),
            search_area_factor=float(data["search_area_factor"]),
            feature_stride=int(data["feature_stride"]),
            crop_mode=str(data["crop_mode"]),
            max_scale_change=float(data["max_scale_change"]),
            normalize_mean=tuple(float(v) for v in data.get("normalize_mean", Geometry.normalize_mean)),
            normalize_std=tuple(float(v) for v in data.get("normalize_std", Geometry.normalize_std)),
        )
    except KeyError as err:
        raise KeyError(f"train config['data'] lacks the geometry key {err.args[0]!r}") from None


@dataclass(frozen=True)
class AugmentationParams:
    """Initial-frame augmentation (15 samples with the defaults: identity, flip, 4 rotations, 3 blurs,
    4 shifts, 2 dropout copies). Shifts are fractions of half the crop size; blurs are Gaussian sigmas
    (x, y) in crop pixels; ``random_shift_factor`` moves the augmented crops' centre by up to +-1/2 of it
    times the crop size (once per sequence); ``expansion_factor`` is how much larger the region is that the
    augmentations are cut from."""

    fliplr: bool = True
    rotations: tuple[float, ...] = (10.0, -10.0, 45.0, -45.0)
    blurs: tuple[tuple[float, float], ...] = ((3.0, 1.0), (1.0, 3.0), (2.0, 2.0))
    shifts: tuple[tuple[float, float], ...] = ((0.6, 0.6), (-0.6, 0.6), (0.6, -0.6), (-0.6, -0.6))
    dropout_copies: int = 2
    dropout_prob: float = 0.2
    expansion_factor: float = 2.0
    random_shift_factor: float = 1.0 / 3.0

    @property
    def num_image_samples(self) -> int:
        """Augmented crops (identity included), before the dropout copies."""
        return 1 + int(self.fliplr) + len(self.rotations) + len(self.blurs) + len(self.shifts)

    @property
    def num_samples(self) -> int:
        return self.num_image_samples + self.dropout_copies


@dataclass(frozen=True)
class DiMPParams:
    """Everything the DiMP tracker needs besides the network and its geometry.

    ``train_setting`` names the ``dimp/<setting>`` train setting whose latest checkpoint is the default
    network and whose config gives the geometry of a freshly built (random-weight) network.
    """

    train_setting: str = "nce_plus"
    # initialisation
    augmentation: AugmentationParams = field(default_factory=AugmentationParams)
    init_optim_iter: int = 10
    # sample memory and classifier updates
    memory_size: int = 50
    learning_rate: float = 0.01
    init_samples_min_weight: float = 0.25
    train_skipping: int = 20
    update_optim_iter: int = 2
    hard_negative_optim_iter: int = 1
    hard_negative_learning_rate: float = 0.02
    # localisation
    target_not_found_threshold: float = 0.25
    distractor_threshold: float = 0.8
    hard_negative_threshold: float = 0.5
    target_neighborhood_scale: float = 2.2
    displacement_scale: float = 0.8
    #: motion prior on the scores, in [0, 1]: (1 - s) + s x a Hann window centred on the previous position
    #: (``localize.motion_window``); 0 = none (the paper's DiMP settings), 1 = the reference's window_output
    score_window: float = 0.0
    update_scale_when_uncertain: bool = True
    #: the target centre may leave the image by at most this fraction of the target size
    max_outside_fraction: float = 0.3
    min_target_size: float = 1.0
    # box refinement by gradient ascent on the box head's f(x, y)
    refine: bool = True
    refine_mode: Literal["plain", "s1"] = "plain"
    refine_iters: int = 10
    refine_step: float = 2.5e-3
    #: plain: lambda *= decay after every step (1 = fixed step); s1: lambda *= decay after a rejected step
    refine_decay: float = 1.0
    num_random_boxes: int = 9
    box_jitter_pos: float = 0.1  # full width of the uniform centre jitter, times sqrt(w h)
    box_jitter_size: float = 0.5  # full width of the uniform size jitter, times sqrt(w h)
    max_aspect_ratio: float = 6.0
    refine_top_k: int = 3
    #: box-head test features are computed only in a window around the classifier box, this many sqrt(w h)
    #: beyond its edges (candidates start within 0.175 of it; boxes are kept inside the window during the
    #: ascent, which is exact there); None = the whole feature maps (the reference trackers). 0.6: on the
    #: synthetic test set (30-epoch tiny checkpoint, 2968 frames) 1 frame averaged a box that reached the
    #: window's edge, none at 0.75 or 1.0, 243 at 0.25; AUC 20.87 (0.6), 20.70 (0.75), 20.76 (1.0), 20.82 (None)
    refine_window: float | None = 0.6
    # runtime
    channels_last: bool = True
    #: True: no host read of device values in a frame but the output box: the localisation state masks
    #: (torch.where) instead of branching, so refinement always runs, the memory update is masked and a
    #: hard-negative filter step runs every frame. False: read the state once per frame and skip the work it
    #: does not need (cheaper where a host read costs nothing). None: True on CUDA, False elsewhere.
    sync_free: bool | None = None
    #: torch.compile the per-frame backbone and classifier feature head (:mod:`.compiled`): faster frames
    #: after a one-off compilation on the first frame (about 13 s for ResNet-50 on 2 CPU cores); falls back
    #: to eager with a warning where compilation fails
    compile: bool = False
    #: the heads' per-frame convolutions (classifier feature head, box head's test branches) and the
    #: refinement's per-box Linear products in int8 on a CPU (:mod:`.int8`): 3.2-5.4x faster convolutions
    #: at the paper's widths, quantisation noise of about 1% of their outputs; slower for tiny heads. With
    #: ``compile`` it replaces the compiled classifier feature head. Ignored, with a warning, on other
    #: devices or where this torch build has no oneDNN int8 convolution
    int8_heads: bool = False
    #: replay the box refinement as a CUDA graph (:mod:`.graphs`): on a GPU the refinement's ~1500 small
    #: kernels per frame cost the host far more time to launch than the device to run. The graph needs fixed
    #: shapes, so it scores boxes on the whole maps (``refine_window`` is not used; the window saves
    #: arithmetic, which a GPU has to spare). None: True on CUDA, False elsewhere. True on a CPU runs the same
    #: fixed-shape path without a graph (what the CPU tests check).
    cuda_graph: bool | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.refine_mode not in ("plain", "s1"):
            raise ValueError(f"DiMPParams.refine_mode must be 'plain' or 's1', got {self.refine_mode!r}")
        if self.memory_size < self.augmentation.num_samples:
            raise ValueError(
                f"DiMPParams.memory_size ({self.memory_size}) must hold the "
                f"{self.augmentation.num_samples} initial samples"
            )
        if not 0.0 < self.learning_rate < 1.0 or not 0.0 < self.hard_negative_learning_rate < 1.0:
            raise ValueError("DiMPParams learning rates must be in (0, 1)")
        if not 0.0 <= self.score_window <= 1.0:
            raise ValueError(f"DiMPParams.score_window must be in [0, 1], got {self.score_window!r}")
        if self.refine_window is not None and not self.refine_window >= 0:
            raise ValueError(f"DiMPParams.refine_window must be None or >= 0, got {self.refine_window!r}")
        if self.compile not in (True, False):
            raise ValueError(f"DiMPParams.compile must be True or False, got {self.compile!r}")
        if self.int8_heads not in (True, False):
            raise ValueError(f"DiMPParams.int8_heads must be True or False, got {self.int8_heads!r}")
        if self.sync_free not in (None, True, False):
            raise ValueError(f"DiMPParams.sync_free must be None, True or False, got {self.sync_free!r}")
        if self.cuda_graph not in (None, True, False):
            raise ValueError(f"DiMPParams.cuda_graph must be None, True or False, got {self.cuda_graph!r}")
        if self.refine_top_k < 1 or self.num_random_boxes < 0:
            raise ValueError("DiMPParams: refine_top_k must be >= 1 and num_random_boxes >= 0")

    def refines_in_graph(self, device_type: str) -> bool:
        """Whether a tracker on a device of this type (``"cuda"``, ``"cpu"``, ...) replays its refinement
        from a graph (:attr:`cuda_graph` resolved; False when refinement is off)."""
        return self.refine and (self.cuda_graph if self.cuda_graph is not None else device_type == "cuda")
