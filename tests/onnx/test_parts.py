"""The exportable parts (pytracking.onnx.parts) against the network's own modules, eagerly (no ONNX needed):
the dense PrRoIPool, the box score from summed-area tables and its traced gradient, the modulation, the filter initializer and one
filter optimizer step."""

import pytest
import torch

from ltr.ebm.predict import value_and_grad
from ltr.ops.prroi_pool import prroi_pool, prroi_pool_dense
from pytracking.onnx import parts
from pytracking.onnx.export import example_inputs
from pytracking.tracker.dimp import random_network


@pytest.fixture(scope="module")
def loaded():
    return random_network("nce_plus_tiny", crop_size=64)


def test_dense_prroi_pool_gives_prroi_pools_values_and_gradients():
    gen = torch.Generator().manual_seed(0)
    features = torch.randn(2, 3, 7, 9, generator=gen, dtype=torch.float64)
    xy = torch.rand(2, 4, 2, generator=gen, dtype=torch.float64) * 40 - 8  # some boxes off the map
    wh = torch.rand(2, 4, 2, generator=gen, dtype=torch.float64) * 30
    wh[0, 1] = 0.0  # an empty box
    boxes = torch.cat([xy, xy + wh], dim=-1).requires_grad_(True)
    dense = prroi_pool_dense(features, boxes, (3, 2), 1 / 4)
    rois = torch.cat(
        [torch.arange(2.0, dtype=torch.float64).repeat_interleave(4)[:, None], boxes.reshape(8, 4)], 1
    )
    plain = prroi_pool(features, rois, (3, 2), 1 / 4).reshape(2, 4, 3, 3, 2)
    torch.testing.assert_close(dense, plain, rtol=1e-12, atol=1e-12)
    weights = torch.randn(dense.shape, generator=gen, dtype=torch.float64)
    (g_dense,) = torch.autograd.grad((dense * weights).sum(), boxes)
    (g_plain,) = torch.autograd.grad((plain * weights).sum(), boxes)
    torch.testing.assert_close(g_dense, g_plain, rtol=1e-12, atol=1e-12)
    assert g_dense.abs().sum() > 0 and torch.all(dense[0, 1] == 0)


def test_box_score_and_its_traced_gradient_are_the_box_heads(loaded):
    net = loaded.net
    x = example_inputs(loaded, num_boxes=6, seed=0)
    modulated = (x["mod_feat2"], x["mod_feat3"])
    tables = parts.BoxTables()(*modulated)
    other = example_inputs(loaded, num_boxes=6, seed=1)["boxes"]  # the trace must not freeze its boxes
    with torch.no_grad():
        traced = parts.box_score_and_grad(net, tables, x["boxes"])
        for boxes in (x["boxes"], other):
            f, g = value_and_grad(lambda b: net.box_head.score_modulated(modulated, b), boxes)
            torch.testing.assert_close(parts.BoxScore(net)(*tables, boxes), f, rtol=1e-5, atol=1e-6)
            f_traced, g_traced = traced(*tables, boxes)
            torch.testing.assert_close(f_traced, f, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(g_traced, g, rtol=1e-4, atol=1e-7)
            assert g.abs().max() > 0


def test_modulation_initial_filter_and_filter_step_are_the_networks(loaded):
    net = loaded.net
    x = example_inputs(loaded, num_boxes=2, seed=2)
    with torch.no_grad():
        mod = parts.Modulation(net)(x["layer2"], x["layer3"], x["box"])
        ref = net.box_head.get_modulation([x["layer2"], x["layer3"]], x["box"])
        for a, b in zip(mod, ref, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        w0 = parts.InitialFilter(net)(x["samples"], x["sample_boxes"])
        torch.testing.assert_close(
            w0,
            net.classifier.initial_filter(x["samples"][:, None], x["sample_boxes"][:, None]),
            rtol=1e-5,
            atol=1e-7,
        )
        step = parts.FilterSteps(net, 1)(x["filters"], x["samples"], x["sample_boxes"], x["weights"])
        ref = net.classifier.optimizer(
            x["filters"],
            x["samples"][:, None],
            x["sample_boxes"][:, None],
            sample_weight=x["weights"][:, None],
            num_iter=1,
        ).filters
        torch.testing.assert_close(step, ref, rtol=0, atol=0)
        assert not torch.allclose(step, x["filters"])
