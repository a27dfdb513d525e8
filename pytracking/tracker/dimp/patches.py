"""Run-time image patches cut exactly as pytracking's DiMP tracker cuts them.

The tracker works in pytracking's conventions: positions ``pos`` are (y, x) image pixels with pixel centres at
integer coordinates, sizes are (h, w). A patch of ``sample_sz`` image pixels around ``pos`` is turned into an
``output_sz`` network input in three whole-pixel steps and one resampling:

1. the centre is truncated to a whole pixel (``int(pos)``, towards zero);
2. if the patch is at least ``k + 0.1`` times the output (``k >= 2``), the image is subsampled by taking every
   ``k``-th row and column, on the grid through that centre pixel;
3. a window of ``round(sample_sz / k)`` (at least 2) grid pixels is cut around the centre; what lies outside the
   image repeats the border pixels. The window spans from ``c - (n - 1) / 2`` to ``c + n / 2 + 1`` and both
   ends are truncated towards zero, so the number of pixels cut depends on the parity of ``n`` and on the side
   of zero the window starts (n or n + 1 pixels);
4. a bilinear resize (``align_corners=False``) to ``output_sz``, skipped when the cut already has that size.

The border modes ``"inside"`` and ``"inside_major"`` first shrink the patch by the largest (``inside``) or the
smallest (``inside_major``) of its size/image-size ratios, clamped to ``[1, max_scale_change]`` and truncated to
whole pixels, then move the window into the image; a window still larger than the image is centred on it.

The returned patch coordinates are the window's ends ``[y1, x1, y2, x2]`` (half-integers possible) times the
subsampling factor, without the subsampling grid's offset: the tracker derives the sample position
``(p1 + p2 - 1) / 2`` and scale from them exactly as the reference does, so they keep the reference's values.

Every computation on sizes runs in float32, the precision of the reference, so that the same truncations and
roundings (``torch.round`` rounds half to even) happen at the same places.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from pytracking.tracker.dimp.frames import concat, upload

BorderMode = Literal["replicate", "inside", "inside_major"]
BORDER_MODES: tuple[str, ...] = ("replicate", "inside", "inside_major")

SizeLike = Tensor | Sequence[float]

__all__ = [
    "BORDER_MODES",
    "BorderMode",
    "PatchWindow",
    "patch_window",
    "patch_windows",
    "sample_patch",
    "sample_patches",
    "sample_patch_multiscale",
    "sample_patch_transformed",
]


class PatchWindow(NamedTuple):
    """Where one patch is cut: every ``stride``-th image row/column starting at ``offset`` (y, x) forms the grid;
    ``start``/``end`` (y, x) are the window's ends on that grid (half-integers possible; pixels
    ``int(start) .. int(end) - 1`` are cut, indices outside the grid repeat its border)."""

    stride: int
    offset: tuple[int, int]
    start: tuple[float, float]
    end: tuple[float, float]

    @property
    def ends(self) -> list[float]:
        """``[y1, x1, y2, x2]``: the window's ends times the stride (the reference's coords)."""
        s = self.stride
        return [s * self.start[0], s * self.start[1], s * self.end[0], s * self.end[1]]


def _float_pair(x: SizeLike) -> Tensor:
    """(2,) float32 on the CPU, where all geometry is computed (the pixels may live on any device)."""
    return torch.as_tensor(x, dtype=torch.float32).detach().cpu().reshape(2)


def patch_window(
    image_hw: tuple[int, int],
    pos: SizeLike,
    sample_sz: SizeLike,
    output_sz: SizeLike | None = None,
    mode: BorderMode = "replicate",
    max_scale_change: float | None = None,
) -> PatchWindow:
    """The window :func:`sample_patch` cuts, without touching pixels (:func:`patch_windows` of one patch).

    Args:
        image_hw: (H, W) of the image.
        pos: (2,) patch centre (y, x), image pixels.
        sample_sz: (2,) patch size (h, w), image pixels.
        output_sz: (2,) network input size (h, w), or None (no subsampling, no resize).
        mode: ``"replicate"``, ``"inside"`` or ``"inside_major"`` (see the module docstring).
        max_scale_change: largest shrink factor in the inside modes (None: unbounded).
    """
    pos_t, size_t = _float_pair(pos), _float_pair(sample_sz)
    return patch_windows([image_hw], pos_t[None], size_t[None], output_sz, mode, max_scale_change)[0]


def patch_windows(
    images_hw: Sequence[tuple[int, int]],
    pos: Tensor,
    sample_sz: Tensor,
    output_sz: SizeLike | None = None,
    mode: BorderMode = "replicate",
    max_scale_change: float | None = None,
) -> list[PatchWindow]:
    """The windows of B patches, patch i of image (H, W) ``images_hw[i]`` at ``pos[i]`` (B, 2) with size
    ``sample_sz[i]`` (B, 2) (float32, CPU); the rest as :func:`patch_window`. The size arithmetic runs on
    all rows at once, in float32 row by row as for one patch, so each window is the one its patch gets
    alone."""
    if mode not in BORDER_MODES:
        raise ValueError(f"unknown border mode {mode!r}; expected one of {BORDER_MODES}")
    size = sample_sz.to(torch.float32)
    if mode != "replicate":
        image = torch.tensor([[float(h), float(w)] for h, w in images_hw])
        ratios = size / image
        shrink = ratios.amax(dim=1) if mode == "inside" else ratios.amin(dim=1)
        shrink = shrink.clamp(min=1.0, max=max_scale_change)
        size = (size / shrink[:, None]).trunc()
    strides = [1] * len(images_hw)
    if output_sz is not None:
        ratios_out = (size / _float_pair(output_sz)).amin(dim=1).tolist()
        strides = [max(int(ratio - 0.1), 1) for ratio in ratios_out]
    stride_t = torch.tensor(strides, dtype=torch.float32)[:, None]
    cuts = torch.clamp(torch.round(size / stride_t), min=2.0).long().tolist()
    centres = pos.to(torch.float32).trunc().long().tolist()
    return [
        _window(hw, centre, cut, stride, mode)
        for hw, centre, cut, stride in zip(images_hw, centres, cuts, strides, strict=True)
    ]


def _window(
    image_hw: tuple[int, int], centre: list[int], cut: list[int], stride: int, mode: BorderMode
) -> PatchWindow:
    """The window of ``cut`` (h, w) grid pixels around the whole-pixel ``centre`` (y, x) on the ``stride``
    grid of an ``image_hw`` image (module docstring, steps 2 and 3)."""
    offset = [c % stride for c in centre]
    grid_len = [len(range(offset[d], image_hw[d], stride)) for d in range(2)]

    start: list[float] = []
    end: list[float] = []
    for d in range(2):
        c = (centre[d] - offset[d]) // stride
        a = c - (cut[d] - 1) / 2
        b = c + cut[d] / 2 + 1
        if mode != "replicate":
            before = max(-a, 0.0)
            after = max(b - grid_len[d], 0.0)
            a, b = a + before - after, b + before - after
            overflow = (max(-a, 0.0) + max(b - grid_len[d], 0.0)) // 2
            if overflow > 0:
                move = -a - overflow
                a, b = a + move, b + move
        start.append(a)
        end.append(b)
    return PatchWindow(stride, (offset[0], offset[1]), (start[0], start[1]), (end[0], end[1]))


def _indices(window: PatchWindow, image_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The image rows and columns (int64) of ``window``'s pixels, border pixels repeated outside the image
    (host integers: numpy, which costs a fraction of a tensor operation's overhead for a few hundred numbers).

    An image side shorter than the window's offset has no strided sample at all (the reference's slice is
    empty and its padding fails); its last pixel stands in for it, so tiny frames track instead of crashing.
    """
    idx = []
    for d in range(2):
        n = image_hw[d]
        grid_len = len(range(window.offset[d], n, window.stride))
        grid = np.arange(int(window.start[d]), int(window.end[d]), dtype=np.int64)
        if grid_len == 0:
            idx.append(np.full_like(grid, n - 1))
        else:
            idx.append(window.offset[d] + window.stride * grid.clip(0, grid_len - 1))
    return idx[0], idx[1]


def sample_patch(
    im: Tensor,
    pos: SizeLike,
    sample_sz: SizeLike,
    output_sz: SizeLike | None = None,
    mode: BorderMode = "replicate",
    max_scale_change: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Cut one patch as pytracking's ``sample_patch`` does (module docstring: the rules).

    Args:
        im: (1, C, H, W) image, uint8 or float (pixel values 0..255), any device.
        pos: (2,) centre (y, x), image pixels.
        sample_sz: (2,) patch size (h, w), image pixels.
        output_sz: (2,) output size (h, w), or None for the cut pixels as they are.
        mode: border mode; max_scale_change: the inside modes' largest shrink factor.

    Returns:
        patch (1, C, oh, ow) float32 (or ``im``'s float dtype) on ``im``'s device and its coordinates
        (1, 4) float32 ``[y1, x1, y2, x2]`` in image pixels (CPU).
    """
    pos_t, size_t = _float_pair(pos), _float_pair(sample_sz)
    return sample_patches([im], pos_t[None], size_t[None], output_sz, mode, max_scale_change)


def sample_patches(
    images: Sequence[Tensor],
    pos: Tensor,
    sample_sz: Tensor,
    output_sz: SizeLike | None = None,
    mode: BorderMode = "replicate",
    max_scale_change: float | None = None,
) -> tuple[Tensor, Tensor]:
    """B patches at once, patch i cut from ``images[i]`` (1, C, H, W) at ``pos[i]`` with ``sample_sz[i]``
    ((B, 2) float32, CPU), each as :func:`sample_patch` cuts it alone, all with one ``output_sz``
    (required when B > 1, so that the patches stack).

    The windows' arithmetic runs on all rows at once (:func:`patch_windows`) and the pixel indices go to
    the device in one copy; a uint8 image is cut before its pixels become float (the same values, less
    memory traffic). Returns patches (B, C, oh, ow) and coordinates (B, 4) as :func:`sample_patch`.
    """
    if len(images) > 1 and output_sz is None:
        raise ValueError("sample_patches: B > 1 patches need an output_sz")
    hw = [(int(im.shape[2]), int(im.shape[3])) for im in images]
    windows = patch_windows(hw, pos, sample_sz, output_sz, mode, max_scale_change)
    index = [i for window, size in zip(windows, hw, strict=True) for i in _indices(window, size)]
    lengths = [len(i) for i in index]
    device = images[0].device
    index = upload(np.concatenate(index), device).split(lengths)  # one copy to the device, no wait
    out_hw = None if output_sz is None else [int(v) for v in _float_pair(output_sz).long().tolist()]
    patches = []
    for k, im in enumerate(images):
        patch = im.index_select(2, index[2 * k]).index_select(3, index[2 * k + 1])
        if not patch.is_floating_point():
            patch = patch.float()
        if out_hw is not None and list(patch.shape[-2:]) != out_hw:
            patch = F.interpolate(patch, size=out_hw, mode="bilinear", align_corners=False)
        patches.append(patch)
    return concat(patches), torch.tensor([window.ends for window in windows])


def sample_patch_multiscale(
    im: Tensor,
    pos: SizeLike,
    scales: float | Sequence[float] | Tensor,
    image_sz: SizeLike,
    mode: BorderMode = "replicate",
    max_scale_change: float | None = None,
) -> tuple[Tensor, Tensor]:
    """One patch per scale, each of ``scale * image_sz`` image pixels resized to ``image_sz``.

    Args:
        im: (1, C, H, W) image (as :func:`sample_patch`); pos: (2,) centre (y, x); image_sz: (2,) output
            size (h, w).
        scales: a number, a sequence or a 1-D tensor of S scales (multiplied with ``image_sz`` in float32).

    Returns:
        patches (S, C, h, w) and coordinates (S, 4) float32 ``[y1, x1, y2, x2]``.
    """
    size = _float_pair(image_sz)
    scale_list = torch.as_tensor(scales, dtype=torch.float32).detach().cpu().reshape(-1, 1)
    n = scale_list.shape[0]
    centre = _float_pair(pos)[None].expand(n, 2)
    return sample_patches([im] * n, centre, scale_list * size, size, mode, max_scale_change)


def sample_patch_transformed(
    im: Tensor,
    pos: SizeLike,
    scale: float | Tensor,
    image_sz: SizeLike,
    transforms: Sequence[Callable[[Tensor], Tensor]],
) -> Tensor:
    """Cut one ``scale * image_sz`` patch (border mode ``replicate``), resize it to ``image_sz`` and apply every
    transform to it (each maps (1, C, h, w) to (1, C, h', w')).

    Returns:
        (N, C, h', w'): one patch per transform, in the order given.
    """
    size = _float_pair(image_sz)
    scale_t = torch.as_tensor(scale, dtype=torch.float32).detach().cpu()
    patch, _ = sample_patch(im, pos, scale_t * size, size)
    return torch.cat([t(patch) for t in transforms])
