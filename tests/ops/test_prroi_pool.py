"""Tests for ltr.ops.prroi_pool: exact values against numerical integration, gradients, dtypes, edge cases."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch

from ltr.ops import PrRoIPool, prroi_pool

prroi_pool_module = importlib.import_module("ltr.ops.prroi_pool")  # the package attribute is the function

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def bilinear_surface(feature: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bilinear surface of ``feature`` (C, H, W), zero outside, at points x, y (equal shapes S) -> (*S, C)."""
    height, width = feature.shape[-2:]
    kx = np.clip(1.0 - np.abs(x[..., None] - np.arange(width)), 0.0, None)
    ky = np.clip(1.0 - np.abs(y[..., None] - np.arange(height)), 0.0, None)
    return np.einsum("...i,cij,...j->...c", ky, feature, kx)


def _gauss_nodes(lo: float, hi: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights integrating a piecewise-linear-in-each-cell function over [lo, hi] exactly.

    The interval is clipped to the support [-1, size] and cut at the integer grid lines (the kinks of the
    tents); each piece gets 2-point Gauss-Legendre, exact for polynomials up to cubic (here: linear).
    """
    lo_in, hi_in = max(lo, -1.0), min(hi, float(size))
    if hi_in <= lo_in:
        return np.zeros(0), np.zeros(0)
    cuts = np.concatenate([[lo_in], np.arange(np.floor(lo_in) + 1, np.ceil(hi_in)), [hi_in]])
    centre, half = (cuts[1:] + cuts[:-1]) / 2, (cuts[1:] - cuts[:-1]) / 2
    offset = 1.0 / np.sqrt(3.0)
    nodes = np.concatenate([centre - half * offset, centre + half * offset])
    return nodes, np.concatenate([half, half])


def reference_pool(feature: np.ndarray, box: list[float], out_h: int, out_w: int, scale: float) -> np.ndarray:
    """Quadrature mean of the bilinear surface over each bin of ``box`` (xyxy pixels) -> (C, oh, ow)."""
    height, width = feature.shape[-2:]
    x1, y1, x2, y2 = (v * scale for v in box)
    out = np.zeros((feature.shape[0], out_h, out_w))
    for p in range(out_h):
        ya, yb = y1 + (y2 - y1) * p / out_h, y1 + (y2 - y1) * (p + 1) / out_h
        ys, wy = _gauss_nodes(ya, yb, height)
        for q in range(out_w):
            xa, xb = x1 + (x2 - x1) * q / out_w, x1 + (x2 - x1) * (q + 1) / out_w
            xs, wx = _gauss_nodes(xa, xb, width)
            yy, xx = np.meshgrid(ys, xs, indexing="ij")
            values = bilinear_surface(feature, xx, yy)  # (len(ys), len(xs), C)
            out[:, p, q] = np.einsum("i,j,ijc->c", wy, wx, values) / ((xb - xa) * (yb - ya))
    return out


# (batch index, x1, y1, x2, y2) in image pixels; with scale 0.5 the 5 x 6 map spans x in [0, 10], y in [0, 8].
BOXES = [
    [0, 2.3, 1.7, 7.9, 6.2],  # inside
    [1, -3.0, -2.5, 4.1, 3.3],  # crossing the top-left border
    [1, 6.2, 5.1, 14.0, 11.0],  # crossing the bottom-right border
    [0, 13.0, 12.0, 20.0, 18.0],  # fully outside: more than one cell beyond the map
    [1, 11.0, 1.0, 11.8, 3.0],  # outside but within one cell, where the surface is still non-zero
    [0, 3.31, 4.02, 3.47, 4.15],  # sub-pixel
    [1, -40.0, -35.0, 52.0, 47.0],  # huge
    [0, 0.0, 0.0, 10.0, 8.0],  # exactly the sample span
]


@pytest.mark.parametrize("output_size", [1, 3, (2, 5)])
def test_matches_numerical_integration(output_size: int | tuple[int, int]) -> None:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(2, 3, 5, 6, generator=generator, dtype=torch.float64)
    rois = torch.tensor(BOXES, dtype=torch.float64)
    out = prroi_pool(features, rois, output_size, 0.5)
    out_h, out_w = (output_size, output_size) if isinstance(output_size, int) else output_size
    assert out.shape == (len(BOXES), 3, out_h, out_w)
    for k, roi in enumerate(BOXES):
        expected = reference_pool(features[int(roi[0])].numpy(), roi[1:], out_h, out_w, 0.5)
        np.testing.assert_allclose(out[k].numpy(), expected, rtol=0, atol=1e-12, err_msg=f"box {k}: {roi}")
    assert out[3].abs().max() == 0.0
    assert out[4].abs().max() > 1e-3


def test_reference_quadrature_agrees_with_dense_sampling() -> None:
    """Guards the quadrature reference itself with a plain midpoint rule over a fine grid."""
    generator = torch.Generator().manual_seed(5)
    feature = torch.randn(1, 4, 5, generator=generator, dtype=torch.float64).numpy()
    box = [-1.3, 0.4, 3.7, 4.6]  # crosses the map border, scale 1, one bin
    samples = (np.arange(1000) + 0.5) / 1000
    yy, xx = np.meshgrid(box[1] + 4.2 * samples, box[0] + 5.0 * samples, indexing="ij")
    dense = bilinear_surface(feature, xx, yy).mean(axis=(0, 1))
    np.testing.assert_allclose(reference_pool(feature, box, 1, 1, 1.0)[:, 0, 0], dense, rtol=0, atol=1e-5)
    features = torch.from_numpy(feature)[None]
    pooled = prroi_pool(features, torch.tensor([[0.0, *box]], dtype=torch.float64), 1, 1.0)
    np.testing.assert_allclose(pooled[0, :, 0, 0].numpy(), dense, rtol=0, atol=1e-5)


def test_constant_map_inside_and_outside() -> None:
    features = torch.full((1, 2, 8, 8), 2.5)
    rois = torch.tensor([[0, 1.0, 1.5, 6.0, 7.0], [0, 20.0, 20.0, 30.0, 30.0]])
    out = prroi_pool(features, rois, 4, 1.0)
    torch.testing.assert_close(out[0], torch.full((2, 4, 4), 2.5), rtol=0, atol=1e-6)
    assert torch.equal(out[1], torch.zeros(2, 4, 4))


def test_output_order_follows_input_rois() -> None:
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(3, 4, 7, 9, generator=generator)
    rois = torch.tensor(
        [[2, 1.0, 2.0, 5.0, 6.0], [0, 0.5, 0.5, 8.0, 6.0], [2, 3.0, 1.0, 4.0, 3.0], [1, 2, 2, 6, 5]]
    )
    out = prroi_pool(features, rois, (3, 2), 1.0)
    for k in range(len(rois)):
        single = prroi_pool(features, rois[k : k + 1], (3, 2), 1.0)
        torch.testing.assert_close(out[k : k + 1], single)
    # An image with no rois and a map with rois only for the last image are fine.
    only_last = prroi_pool(features, rois[[0, 2]], (3, 2), 1.0)
    torch.testing.assert_close(only_last, out[[0, 2]])
    # As many rois for every image (the batched path), given unsorted.
    balanced = rois[[0, 3, 1, 2, 1, 3]].clone()
    balanced[:, 0] = torch.tensor([2.0, 0.0, 1.0, 2.0, 0.0, 1.0])
    out = prroi_pool(features, balanced, (3, 2), 1.0)
    for k in range(len(balanced)):
        torch.testing.assert_close(out[k : k + 1], prroi_pool(features, balanced[k : k + 1], (3, 2), 1.0))


# Image indices that take the padded path without scattering (sorted, as many per image), the padded path
# with scattering and an empty slot, and the per-image loop (too uneven for padding); the last two unsorted.
LAYOUTS = [[0.0, 1.0, 2.0], [1.0, 0.0, 2.0, 1.0, 0.0, 2.0, 1.0, 0.0], [2.0, 2.0, 0.0, 2.0]]


@pytest.mark.parametrize("images", LAYOUTS)
def test_gradcheck_features_and_boxes(images: list[float]) -> None:
    generator = torch.Generator().manual_seed(2)
    features = torch.randn(3, 2, 4, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    index = torch.tensor(images, dtype=torch.float64)[:, None]
    # Random corners: no bin edge falls on a grid line, where the second derivative jumps.
    corner = torch.rand(len(images), 2, generator=generator, dtype=torch.float64) * 10 - 2
    size = torch.rand(len(images), 2, generator=generator, dtype=torch.float64) * 6 + 0.3
    coords = torch.cat([corner, corner + size], dim=1).requires_grad_(True)

    def pool(feat: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
        return prroi_pool(feat, torch.cat([index, box], dim=1), (2, 3), 0.8)

    assert torch.autograd.gradcheck(pool, (features, coords), eps=1e-6, atol=1e-6)
    assert torch.autograd.gradgradcheck(pool, (features, coords), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("images", LAYOUTS)
def test_padded_and_per_image_paths_agree(images: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    generator = torch.Generator().manual_seed(6)
    features = torch.randn(3, 4, 6, 7, generator=generator)
    xy = torch.rand(len(images), 2, generator=generator) * 20
    rois = torch.cat([torch.tensor(images)[:, None], xy, xy + 5.0], dim=1).requires_grad_(True)
    results = []
    for padding in (0.0, float("inf")):  # never pad, always pad
        monkeypatch.setattr(prroi_pool_module, "_MAX_PADDING", padding)
        out = prroi_pool(features, rois, (2, 3), 0.5)
        (grad,) = torch.autograd.grad((out * out).sum(), rois)
        results.append((out, grad))
    torch.testing.assert_close(results[0][0], results[1][0])
    torch.testing.assert_close(results[0][1], results[1][1])


def test_window_of_touched_cells_matches_full_map() -> None:
    """Rois near one corner only read a window of the map; a second, spanning roi forces the full map."""
    generator = torch.Generator().manual_seed(8)
    features = torch.randn(2, 3, 12, 14, generator=generator, dtype=torch.float64)
    local = torch.tensor([[1, 2.3, 3.1, 6.7, 5.2], [0, 3.9, 2.2, 4.4, 7.9]], dtype=torch.float64)
    spanning = torch.tensor([[0, -3.0, -3.0, 20.0, 20.0]], dtype=torch.float64)
    results = []
    for extra in (local[:0], spanning):
        feat = features.clone().requires_grad_(True)
        boxes = local.clone().requires_grad_(True)
        out = prroi_pool(feat, torch.cat([boxes, extra]), 3, 1.0)[: len(local)]
        grads = torch.autograd.grad((out * out).sum(), (feat, boxes))
        results.append((out, *grads))
    for cropped, full in zip(results[0], results[1], strict=True):
        torch.testing.assert_close(cropped, full, rtol=0, atol=1e-12)
    coords = local[:, 1:].clone().requires_grad_(True)
    feat = features[:, :1].clone().requires_grad_(True)

    def pool(feat: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
        return prroi_pool(feat, torch.cat([local[:, :1], coords], dim=1), 3, 1.0)

    assert torch.autograd.gradcheck(pool, (feat, coords), eps=1e-6, atol=1e-6)
    # A roi entirely off the map still pools (to zeros) with a graph to differentiate.
    feat = features.clone().requires_grad_(True)
    boxes = torch.tensor([[0, 40.0, 50.0, 45.0, 52.0]], dtype=torch.float64, requires_grad=True)
    out = prroi_pool(feat, boxes, 2, 1.0)
    out.sum().backward()
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.equal(boxes.grad, torch.zeros_like(boxes)) and torch.equal(feat.grad, torch.zeros_like(feat))


def test_zero_area_boxes_give_zeros_and_zero_gradients() -> None:
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(1, 3, 6, 6, generator=generator, requires_grad=True)
    coords = torch.tensor(
        [[2.0, 1.0, 2.0, 4.0], [1.0, 3.0, 4.0, 3.0], [4.0, 4.0, 1.0, 5.0], [1.0, 1.0, 4.0, 4.0]],
        requires_grad=True,
    )
    rois = torch.cat([torch.zeros(4, 1), coords], dim=1)
    out = prroi_pool(features, rois, 3, 1.0)
    assert torch.equal(out[:3], torch.zeros(3, 3, 3, 3))
    assert out[3].abs().sum() > 0
    (out * torch.arange(1.0, 4.0)[None, :, None, None]).sum().backward()
    assert torch.isfinite(coords.grad).all() and torch.isfinite(features.grad).all()
    assert torch.equal(coords.grad[:3], torch.zeros(3, 4))
    assert coords.grad[3].abs().sum() > 0


@pytest.mark.parametrize("width", [30.0, 1.0, 0.01])
def test_float32_keeps_precision_for_tiny_boxes(width: float) -> None:
    """Weights are K differences over nearby edges divided by the bin width: no cancellation blow-up."""
    generator = torch.Generator().manual_seed(7)
    features = torch.randn(1, 4, 18, 18, generator=generator)
    rois = torch.tensor([[0.0, 100.3, 120.7, 100.3 + width, 120.7 + width]])
    out = prroi_pool(features, rois, 5, 1 / 16)
    reference = prroi_pool(features.double(), rois.double(), 5, 1 / 16)
    torch.testing.assert_close(out.double(), reference, rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_close_to_float32(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(4)
    features = torch.randn(2, 8, 18, 18, generator=generator)
    xy = torch.rand(16, 2, generator=generator) * 250
    wh = torch.rand(16, 2, generator=generator) * 80 + 4
    rois = torch.cat([torch.randint(0, 2, (16, 1), generator=generator).float(), xy, xy + wh], dim=1)
    low = features.to(dtype)
    reference = prroi_pool(low.float(), rois, 5, 1 / 16)  # same inputs, float32 arithmetic
    out = prroi_pool(low, rois, 5, 1 / 16)
    assert out.dtype == dtype
    tolerance = 2e-2 if dtype == torch.bfloat16 else 3e-3
    torch.testing.assert_close(out.float(), reference, rtol=0, atol=tolerance * reference.abs().max().item())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shape_dtype_device_and_module(device: str, dtype: torch.dtype) -> None:
    features = torch.randn(2, 5, 9, 11, dtype=dtype, device=device)
    rois = torch.tensor([[1, 0.0, 0.0, 40.0, 30.0], [0, 8.0, 4.0, 20.0, 33.0]], dtype=dtype, device=device)
    out = prroi_pool(features, rois, (4, 3), 0.25)
    assert out.shape == (2, 5, 4, 3) and out.dtype == dtype and out.device == features.device
    assert out.is_contiguous()
    module = PrRoIPool((4, 3), 0.25)
    assert torch.equal(module(features, rois), out)
    assert "output_size=(4, 3)" in repr(module)
    channels_last = prroi_pool(features.to(memory_format=torch.channels_last), rois, (4, 3), 0.25)
    torch.testing.assert_close(channels_last, out)
    strided = torch.randn(2, 5, 9, 22, dtype=dtype, device=device)[..., ::2]
    torch.testing.assert_close(
        prroi_pool(strided, rois, (4, 3), 0.25), prroi_pool(strided.contiguous(), rois, (4, 3), 0.25)
    )
    empty = prroi_pool(features, rois[:0], 2, 0.25)
    assert empty.shape == (0, 5, 2, 2) and empty.dtype == dtype


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("images", LAYOUTS)
def test_runs_under_deterministic_algorithms(
    device: str, images: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # what deterministic cuBLAS products require
    generator = torch.Generator().manual_seed(9)
    features = torch.randn(3, 4, 9, 9, generator=generator).to(device).requires_grad_(True)
    xy = torch.rand(len(images), 2, generator=generator) * 20
    rois = torch.cat([torch.tensor(images)[:, None], xy, xy + 9.0], dim=1).to(device).requires_grad_(True)
    expected = prroi_pool(features, rois, 3, 0.5)
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        out = prroi_pool(features, rois, 3, 0.5)
        grads = torch.autograd.grad(out.square().sum(), (features, rois))
    finally:
        torch.use_deterministic_algorithms(previous)
    torch.testing.assert_close(out, expected)
    assert all(torch.isfinite(grad).all() for grad in grads)


def test_box_gradient_points_toward_bright_blob() -> None:
    yy, xx = torch.meshgrid(torch.arange(20.0), torch.arange(20.0), indexing="ij")
    blob = torch.exp(-((xx - 14.0) ** 2 + (yy - 6.0) ** 2) / 8.0)  # bright spot at (x, y) = (14, 6)
    features = blob[None, None]
    coords = torch.tensor([[3.0, 9.0, 9.0, 15.0]], requires_grad=True)  # left of and below the blob
    value = prroi_pool(features, torch.cat([torch.zeros(1, 1), coords], dim=1), 1, 1.0).sum()
    value.backward()
    grad = coords.grad[0]
    assert grad[0] > 0 and grad[2] > 0  # moving right increases the value
    assert grad[1] < 0 and grad[3] < 0  # moving up (smaller y) increases the value
    moved = coords.detach() + 0.5 * grad / grad.norm()
    moved_value = prroi_pool(features, torch.cat([torch.zeros(1, 1), moved], dim=1), 1, 1.0).sum()
    assert moved_value > value


def test_bad_inputs_raise_with_names() -> None:
    features = torch.randn(2, 3, 4, 4)
    good = torch.tensor([[0, 0.0, 0.0, 2.0, 2.0]])
    with pytest.raises(ValueError, match="features"):
        prroi_pool(features[0], good, 2, 1.0)
    with pytest.raises(ValueError, match="rois"):
        prroi_pool(features, good[:, :4], 2, 1.0)
    with pytest.raises(ValueError, match=r"rois\[1, 0\]"):
        prroi_pool(features, torch.tensor([[0, 0.0, 0, 1, 1], [2, 0.0, 0, 1, 1]]), 2, 1.0)
    with pytest.raises(ValueError, match=r"rois\[0, 0\]"):
        prroi_pool(features, torch.tensor([[0.5, 0.0, 0, 1, 1]]), 2, 1.0)
    with pytest.raises(ValueError, match="output_size"):
        prroi_pool(features, good, 0, 1.0)
    with pytest.raises(TypeError, match="output_size"):
        prroi_pool(features, good, (2, 2, 2), 1.0)
    with pytest.raises(ValueError, match="spatial_scale"):
        prroi_pool(features, good, 2, 0.0)
    with pytest.raises(ValueError, match="spatial_scale"):
        PrRoIPool(2, float("inf"))
    assert PrRoIPool(2, np.float32(0.125)).spatial_scale == 0.125
    with pytest.raises(TypeError, match="features"):
        prroi_pool(features.long(), good, 2, 1.0)


def test_sorted_rois_with_fewer_in_the_last_image_take_the_padded_grid_correctly():
    """Counts [4, 3] sorted by image: slots equal positions but the grid has 8 rows (was a reshape error)."""
    torch.manual_seed(0)
    features = torch.randn(2, 4, 16, 16, dtype=torch.float64)
    boxes = torch.tensor(
        [
            [51, 86, 84, 113],
            [24, 30, 54, 39],
            [25, 0, 40, 33],
            [88, 99, 113, 104],
            [30, 84, 53, 107],
            [74, 40, 83, 45],
            [9, 32, 41, 61],
        ],
        dtype=torch.float64,
    )
    index = torch.tensor([0, 0, 0, 0, 1, 1, 1], dtype=torch.float64)
    rois = torch.cat([index[:, None], boxes], dim=1)
    pooled = prroi_pool(features, rois, 3, 1 / 8)
    for i in range(7):
        single = prroi_pool(
            features[int(index[i]) : int(index[i]) + 1],
            torch.cat([rois[i : i + 1, :1] * 0, boxes[i : i + 1]], 1),
            3,
            1 / 8,
        )
        assert torch.allclose(pooled[i], single[0], atol=1e-12)
