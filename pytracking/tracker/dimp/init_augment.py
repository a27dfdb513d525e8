"""The first frame's augmented training samples, made exactly as pytracking's DiMP tracker makes them.

One patch of ``expansion_factor`` times the network input (:func:`.patches.sample_patch_transformed`, border
mode ``replicate``, centred on the rounded target position) is cut, and every transform maps it to one sample
of the network input size: it first changes the patch (flip, blur, scale, rotation, or nothing) and then cuts
the centre of the result moved by its whole-pixel ``shift`` (dy, dx): a content point at ``p`` in the centred
cut lands at ``p + shift``, so the target box of a sample is the un-augmented box moved by ``shift`` (flips and
rotations leave the box where it was, as in the reference). Border pixels repeat where the cut leaves the
patch.

The samples come in the reference's order: identity, absolute shifts, relative shifts, horizontal flip, blurs,
scales, rotations. Every transform after the shifts gets a random shift drawn as ``torch.rand(2)`` from the
given generator, in that order, so a generator seeded like the reference's global RNG yields the same
samples. Dropout copies of the identity sample are made later, on the classification features
(:func:`feature_dropout`, drawn from the same generator next).

With border mode ``inside`` (and only then, as in the reference) the patch keeps the scale the tracker's
``inside`` crops would have, and every sample is moved by a global shift that puts the target where those crops
would put it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from pytracking.tracker.dimp.patches import SizeLike, sample_patch_transformed

__all__ = [
    "Blur",
    "FlipHorizontal",
    "Identity",
    "InitAugmentation",
    "InitPatches",
    "InitTransform",
    "PYTRACKING_KEYS",
    "Rotate",
    "Scale",
    "Translation",
    "crop_to_output",
    "feature_dropout",
    "generate_init_patches",
]


def crop_to_output(image: Tensor, output_sz: tuple[int, int] | None, shift: tuple[int, int]) -> Tensor:
    """The centre of (N, C, H, W) ``image`` cut to ``output_sz`` (h, w) (None: the image size) and moved by
    ``shift`` (dy, dx) whole pixels; rows/columns outside the image repeat its border.

    When the size difference is odd, the extra row/column comes from the bottom/right: output pixel ``i``
    reads input pixel ``i - floor((out - in) / 2) - shift``.
    """
    idx = []
    for d in range(2):
        n = image.shape[2 + d]
        out = n if output_sz is None else int(output_sz[d])
        first = math.floor((out - n) / 2) + int(shift[d])
        idx.append((torch.arange(out, device=image.device) - first).clamp(0, n - 1))
    return image.index_select(2, idx[0]).index_select(3, idx[1])


@dataclass(frozen=True, kw_only=True)
class InitTransform:
    """One augmented sample: :meth:`apply` changes the (1, C, H, W) patch, then :func:`crop_to_output` cuts
    ``output_sz`` (h, w) (None: the patch size) moved by ``shift`` (dy, dx) whole pixels."""

    output_sz: tuple[int, int] | None = None
    shift: tuple[int, int] = (0, 0)

    def apply(self, image: Tensor) -> Tensor:
        """The transform itself, before the cut (identity here)."""
        return image

    def __call__(self, image: Tensor) -> Tensor:
        return crop_to_output(self.apply(image), self.output_sz, self.shift)


@dataclass(frozen=True, kw_only=True)
class Identity(InitTransform):
    """The un-augmented sample (only the cut and the global shift)."""


@dataclass(frozen=True, kw_only=True)
class Translation(InitTransform):
    """A shifted sample: ``shift`` is the total (global shift + ``translation``), ``translation`` (dy, dx)
    the augmentation's own part."""

    translation: tuple[int, int] = (0, 0)


@dataclass(frozen=True, kw_only=True)
class FlipHorizontal(InitTransform):
    """Mirrored left-right (the target box is not mirrored: the target is centred)."""

    def apply(self, image: Tensor) -> Tensor:
        return image.flip(3)


@dataclass(frozen=True, kw_only=True)
class Blur(InitTransform):
    """Separable Gaussian blur, ``sigma`` = (sigma_y, sigma_x) pixels; zero padding at the patch border.

    Each kernel has ``2 * ceil(2 * sigma) + 1`` taps, sampled at whole pixels and normalised to sum 1.
    """

    sigma: tuple[float, float] = (1.0, 1.0)

    def kernel(self, axis: int) -> Tensor:
        """(2k + 1,) float32 taps along ``axis`` (0: y, 1: x)."""
        s = self.sigma[axis]
        k = math.ceil(2 * s)
        x = torch.arange(-k, k + 1, dtype=torch.float32)
        g = torch.exp(-(x**2) / (2 * s**2))
        return g / g.sum()

    def apply(self, image: Tensor) -> Tensor:
        h, w = image.shape[-2:]
        ky, kx = self.kernel(0).to(image), self.kernel(1).to(image)
        planes = image.reshape(-1, 1, h, w)
        planes = F.conv2d(planes, ky.view(1, 1, -1, 1), padding=(ky.numel() // 2, 0))
        planes = F.conv2d(planes, kx.view(1, 1, 1, -1), padding=(0, kx.numel() // 2))
        return planes.reshape(image.shape)


@dataclass(frozen=True, kw_only=True)
class Scale(InitTransform):
    """Bilinear resize by ``1 / factor`` (``align_corners=False``); each new side is ``round(side / factor)``,
    plus one where needed to keep the side's parity, so that the centre cut stays centred."""

    factor: float = 1.0

    def apply(self, image: Tensor) -> Tensor:
        sides = []
        for n in image.shape[-2:]:
            m = round(n / self.factor)
            sides.append(m + (m - n) % 2)
        return F.interpolate(image, sides, mode="bilinear", align_corners=False)


@dataclass(frozen=True, kw_only=True)
class Rotate(InitTransform):
    """Rotation by ``angle`` degrees (counter-clockwise on screen for positive angles) about the patch centre,
    bilinear with replicated border, by OpenCV's ``warpAffine`` as in the reference (whose pixel rounding
    therefore also holds here). The centre is taken as ((H - 1) / 2, (W - 1) / 2) read as (x, y), exact for
    the square patches the tracker uses. At most 4 channels (an OpenCV limit)."""

    angle: float = 0.0

    def matrix(self, h: int, w: int) -> np.ndarray:
        """(2, 3) float64 forward map (x, y, 1) -> (x', y') of the patch."""
        a = math.pi * self.angle / 180
        rot = np.array([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])
        centre = (np.array([[h], [w]], dtype=np.float64) - 1) / 2
        return np.concatenate([rot, centre - rot @ centre], axis=1)

    def apply(self, image: Tensor) -> Tensor:
        if image.shape[0] != 1:
            raise ValueError(f"Rotate takes one (1, C, H, W) patch, got shape {tuple(image.shape)}")
        h, w = image.shape[-2:]
        hwc = image[0].permute(1, 2, 0).detach().cpu().numpy()
        out = cv2.warpAffine(
            hwc, self.matrix(h, w), (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        if out.ndim == 2:
            out = out[:, :, None]
        return torch.from_numpy(out).permute(2, 0, 1)[None].to(device=image.device, dtype=image.dtype)


def _pairs(values: Sequence[Sequence[float] | float]) -> tuple[tuple[float, float], ...]:
    """Pairs of floats; a single number ``s`` (a blur sigma in pytracking's lists) stands for ``(s, s)``."""
    pairs = []
    for v in values:
        a, b = (v, v) if isinstance(v, int | float) else v
        pairs.append((float(a), float(b)))
    return tuple(pairs)


#: pytracking's ``params.augmentation`` keys and the :class:`InitAugmentation` fields they set.
PYTRACKING_KEYS: dict[str, str] = {
    "fliplr": "fliplr",
    "rotate": "rotations",
    "blur": "blurs",
    "relativeshift": "relative_shifts",
    "shift": "shifts",
    "scale": "scales",
    "dropout": "dropout_num, dropout_prob",
}


@dataclass(frozen=True)
class InitAugmentation:
    """Which augmented samples the first frame gives (defaults: pytracking's DiMP-50 / SuperDiMP values).

    Fields (pytracking's ``params.augmentation`` keys in brackets): ``fliplr``; ``rotations`` degrees
    [rotate]; ``blurs`` (sigma_y, sigma_x) [blur]; ``relative_shifts`` (dy, dx) in halves of the network input
    [relativeshift]; ``shifts`` (dy, dx) whole pixels [shift]; ``scales`` [scale]; ``dropout_num`` copies of
    the identity sample's classification features with channel dropout ``dropout_prob`` [dropout];
    ``expansion_factor`` of the patch the samples are cut from (None or 1: no expansion)
    [augmentation_expansion_factor]; ``random_shift_factor``: each random shift is uniform in +-factor/2
    network inputs (0: none).
    """

    fliplr: bool = True
    rotations: tuple[float, ...] = (10.0, -10.0, 45.0, -45.0)
    blurs: tuple[tuple[float, float], ...] = ((3.0, 1.0), (1.0, 3.0), (2.0, 2.0))
    relative_shifts: tuple[tuple[float, float], ...] = ((0.6, 0.6), (-0.6, 0.6), (0.6, -0.6), (-0.6, -0.6))
    shifts: tuple[tuple[float, float], ...] = ()
    scales: tuple[float, ...] = ()
    dropout_num: int = 2
    dropout_prob: float = 0.2
    expansion_factor: float | None = 2.0
    random_shift_factor: float = 1 / 3

    def __post_init__(self) -> None:
        object.__setattr__(self, "rotations", tuple(float(a) for a in self.rotations))
        object.__setattr__(self, "scales", tuple(float(s) for s in self.scales))
        for name in ("blurs", "relative_shifts", "shifts"):
            object.__setattr__(self, name, _pairs(getattr(self, name)))
        if self.dropout_num < 0 or not 0.0 <= self.dropout_prob <= 1.0:
            raise ValueError(
                f"InitAugmentation: dropout_num must be >= 0 and dropout_prob in [0, 1], got "
                f"{self.dropout_num} and {self.dropout_prob}"
            )
        if self.expansion_factor is not None and self.expansion_factor <= 0:
            raise ValueError(f"InitAugmentation.expansion_factor must be > 0, got {self.expansion_factor}")
        if any(s <= 0 for s in self.scales) or any(min(b) <= 0 for b in self.blurs):
            raise ValueError("InitAugmentation: scales and blur sigmas must be > 0")
        if self.random_shift_factor < 0:
            raise ValueError(
                f"InitAugmentation.random_shift_factor must be >= 0, got {self.random_shift_factor}"
            )

    @classmethod
    def from_pytracking(
        cls,
        augmentation: Mapping[str, Any],
        *,
        expansion_factor: float | None = None,
        random_shift_factor: float = 0.0,
        use_augmentation: bool = True,
    ) -> InitAugmentation:
        """The augmentation a pytracking parameter set describes (``params.augmentation``,
        ``augmentation_expansion_factor``, ``random_shift_factor``, ``use_augmentation``; missing ones take
        pytracking's defaults). Unknown augmentation keys are an error."""
        unknown = sorted(set(augmentation) - set(PYTRACKING_KEYS))
        if unknown:
            raise ValueError(
                f"unknown pytracking augmentation keys {unknown}; known: {sorted(PYTRACKING_KEYS)}"
            )
        aug = dict(augmentation) if use_augmentation else {}
        num, prob = aug.get("dropout", (0, 0.0))
        return cls(
            fliplr=bool(aug.get("fliplr", False)),
            rotations=tuple(aug.get("rotate", ())),
            blurs=_pairs(aug.get("blur", ())),
            relative_shifts=_pairs(aug.get("relativeshift", ())),
            shifts=_pairs(aug.get("shift", ())),
            scales=tuple(aug.get("scale", ())),
            dropout_num=int(num),
            dropout_prob=float(prob),
            expansion_factor=expansion_factor,
            random_shift_factor=random_shift_factor,
        )

    @property
    def num_transforms(self) -> int:
        """Number of image samples (identity included, dropout copies not)."""
        return (
            1
            + len(self.shifts)
            + len(self.relative_shifts)
            + int(self.fliplr)
            + len(self.blurs)
            + len(self.scales)
            + len(self.rotations)
        )

    @property
    def num_samples(self) -> int:
        """Number of initial training samples: the image samples plus the dropout copies."""
        return self.num_transforms + self.dropout_num


class InitPatches(NamedTuple):
    """patches: (N, C, h, w) float samples (pixel values 0..255, network input size); transforms: the N
    transforms in sample order (``.shift`` (dy, dx) moves each target box); init_sample_pos: (2,) float32 (y, x)
    centre of the patch (the rounded target position); init_sample_scale: 0-dim float32 image pixels per
    network-input pixel."""

    patches: Tensor
    transforms: tuple[InitTransform, ...]
    init_sample_pos: Tensor
    init_sample_scale: Tensor


def generate_init_patches(
    im: Tensor,
    pos: SizeLike,
    target_scale: float | Tensor,
    img_sample_sz: SizeLike,
    aug: InitAugmentation,
    *,
    border_mode: str,
    max_scale_change: float | None,
    generator: torch.Generator | None,
) -> InitPatches:
    """The first frame's augmented samples (module docstring: the rules).

    Args:
        im: (1, C, H, W) float image (pixel values 0..255).
        pos: (2,) target centre (y, x), image pixels.
        target_scale: image pixels per network-input pixel.
        img_sample_sz: (2,) network input size (h, w).
        aug: which samples to make.
        border_mode: the tracker's crop border mode (only ``"inside"`` changes anything here).
        max_scale_change: the tracker's largest crop shrink factor (``"inside"`` only).
        generator: source of the random shifts (None: torch's global generator).

    Returns:
        the samples on ``im``'s device; the geometry (sample position and scale) on the CPU, in float32.
    """
    pos_t = torch.as_tensor(pos, dtype=torch.float32).detach().cpu().reshape(2)
    base = torch.as_tensor(img_sample_sz, dtype=torch.float32).detach().cpu().reshape(2)
    scale = torch.as_tensor(target_scale, dtype=torch.float32).detach().cpu()

    if border_mode == "inside":
        im_sz = torch.tensor([float(im.shape[2]), float(im.shape[3])])
        sample_sz = scale * base
        shrink = (sample_sz / im_sz).max().clamp(min=1.0, max=max_scale_change)
        sample_sz = sample_sz / shrink
        scale = (sample_sz / base).prod().sqrt()
        start = pos_t - (sample_sz - 1) / 2
        end = pos_t + sample_sz / 2 + 1
        global_shift = ((end - im_sz).clamp(min=0) - (-start).clamp(min=0)) / scale
    else:
        global_shift = torch.zeros(2)
    g_shift = tuple(int(v) for v in global_shift.long().tolist())

    patch_sz = base
    out_sz: tuple[int, int] | None = None
    if aug.expansion_factor is not None and aug.expansion_factor != 1:
        expanded = (base * aug.expansion_factor).long()
        expanded = expanded + (expanded - base.long()) % 2
        patch_sz = expanded.float()
        out_sz = (int(base[0]), int(base[1]))

    def random_shift() -> tuple[int, int]:
        if aug.random_shift_factor <= 0:
            return (0, 0)
        u = torch.rand(2, generator=generator, device=None if generator is None else generator.device).cpu()
        dy, dx = ((u - 0.5) * base * aug.random_shift_factor + global_shift).long().tolist()
        return (dy, dx)

    def translation(dy_dx: Tensor) -> Translation:
        dy, dx = dy_dx.long().tolist()
        return Translation(output_sz=out_sz, shift=(g_shift[0] + dy, g_shift[1] + dx), translation=(dy, dx))

    transforms: list[InitTransform] = [Identity(output_sz=out_sz, shift=g_shift)]
    transforms += [translation(torch.tensor(s, dtype=torch.float32)) for s in aug.shifts]
    transforms += [translation(torch.tensor(s, dtype=torch.float32) * base / 2) for s in aug.relative_shifts]
    if aug.fliplr:
        transforms.append(FlipHorizontal(output_sz=out_sz, shift=random_shift()))
    transforms += [Blur(output_sz=out_sz, shift=random_shift(), sigma=s) for s in aug.blurs]
    transforms += [Scale(output_sz=out_sz, shift=random_shift(), factor=f) for f in aug.scales]
    transforms += [Rotate(output_sz=out_sz, shift=random_shift(), angle=a) for a in aug.rotations]

    init_pos = pos_t.round()
    patches = sample_patch_transformed(im, init_pos, scale, patch_sz, transforms)
    return InitPatches(patches, tuple(transforms), init_pos, scale)


def feature_dropout(x: Tensor, num: int, prob: float, generator: torch.Generator | None) -> Tensor:
    """``num`` copies of the first sample of (N, C, H, W) ``x`` with whole channels dropped (probability
    ``prob``) and the rest scaled by ``1 / (1 - prob)``: (num, C, H, W).

    The reference uses ``F.dropout2d(..., training=True)``, which on a CPU draws one Bernoulli(1 - prob) mask
    of shape (num, C, 1, 1) with ``Tensor.bernoulli_``; the mask here is drawn the same way from ``generator``
    (on the generator's device), so the same generator state gives the same mask on a CPU.
    """
    first = x[:1].expand(num, -1, -1, -1)
    if prob == 0:
        return first.clone()
    if prob == 1:
        return first * torch.zeros((), dtype=x.dtype, device=x.device)
    device = generator.device if generator is not None else torch.device("cpu")
    noise = torch.empty((num, x.shape[1], 1, 1), dtype=x.dtype, device=device)
    noise.bernoulli_(1 - prob, generator=generator)
    noise.div_(1 - prob)
    return first * noise.to(x.device)
