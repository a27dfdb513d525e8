"""The ONNX Runtime backend's box score on a window of the box maps (pytracking.tracker.dimp.box_window) against
the same models on the whole maps: equal scores and gradients (float32: rtol 1e-4, atol 1e-5) for boxes inside the
window, and an ascent whose boxes leave it falls back to the whole maps with the whole maps' result.

The box models of a tiny random network at 160-pixel crops (20 x 20 and 10 x 10 maps, so that a window has inner
edges), exported on their own."""

from __future__ import annotations

import pytest
import torch

from ltr.admin.config import apply_overrides
from pytracking.onnx.export import export_dimp
from pytracking.onnx.manifest import read_manifest
from pytracking.onnx.runtime import OrtStages
from pytracking.parameter.dimp import get_parameters
from pytracking.tracker.dimp import load_network
from pytracking.tracker.dimp.refine import AscentOptions, ascend
from tests.onnx.conftest import OPENED, REFINE
from tests.tracker.helpers import write_tiny_checkpoint

TOL = {"rtol": 1e-4, "atol": 1e-5}
BOX_MODELS = ("box_features", "box_tables", "box_score_grad")


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> OrtStages:
    tmp = tmp_path_factory.mktemp("box_window")
    ckpt = write_tiny_checkpoint(tmp / "tiny160.pth.tar", crop_size=160)
    params = apply_overrides(get_parameters("nce_plus_tiny"), OPENED + REFINE)
    export_dimp(
        load_network(ckpt),
        params,
        tmp / "export",
        param_name="nce_plus_tiny",
        checkpoint=ckpt,
        models=BOX_MODELS,
    )
    return OrtStages(tmp / "export", read_manifest(tmp / "export"))


@pytest.fixture(scope="module")
def inputs(stages) -> tuple[torch.Tensor, ...]:
    """Random box test feature inputs (layer2, layer3, mod2, mod3) at the export's shapes."""
    gen = torch.Generator().manual_seed(0)
    shapes = stages.manifest.models["box_features"].inputs
    assert shapes["layer2"][2:] == ["h2", "w2"] and shapes["layer3"][2:] == ["h3", "w3"]  # any map size
    c2, c3, m2, m3 = (shapes[name][1] for name in ("layer2", "layer3", "mod2", "mod3"))
    return tuple(
        torch.rand(*shape, generator=gen) for shape in ((1, c2, 20, 20), (1, c3, 10, 10), (1, m2), (1, m3))
    )


def whole_maps(stages: OrtStages, inputs):
    """f and df/dboxes from the three models on the whole maps, as the export was used before windows."""
    tables = stages.run("box_tables", *stages.run("box_features", *inputs))
    return lambda boxes: tuple(stages.run("box_score_grad", *tables, boxes))


def candidates() -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    box = torch.tensor([65.0, 62.0, 30.0, 34.0])
    return (box + 6 * (torch.rand(10, 4, generator=gen) - 0.5))[None]  # (1, 10, 4) xywh


def test_boxes_inside_the_window_score_as_on_the_whole_maps(stages, inputs):
    boxes = candidates()
    sizes = [t.shape[-2:] for t in inputs[:2]]
    window = stages.window_rule.window(boxes.numpy(), sizes)
    assert not window.is_whole
    r0, c0, r1, c1 = window.cells[0]
    assert 0 < c0 and c1 < 20 and 0 < r0 and r1 < 20  # inner edges on every side of layer2's window
    before = dict(stages.windows)
    scores, grad = stages.box_score_grad(inputs, boxes)
    want_scores, want_grad = whole_maps(stages, inputs)(boxes)
    torch.testing.assert_close(scores, want_scores, **TOL)
    torch.testing.assert_close(grad, want_grad, **TOL)
    assert grad.abs().max() > 1e-3  # the comparison is not of zeros
    assert (
        stages.windows["refinements"] == before["refinements"] + 1
        and stages.windows["whole"] == before["whole"]
    )


def test_an_ascent_that_leaves_the_window_falls_back_to_the_whole_maps(stages, inputs):
    start = candidates()
    _, grad = whole_maps(stages, inputs)(start)
    # a first step that moves some box by about 40 pixels, well out of the window's 8-pixel margin
    step = 40.0 / float((grad * start[..., 2:].repeat(1, 1, 2)).abs().max())
    options = AscentOptions(space="default", mode="plain", num_iters=3, step_length=step, decay=0.5)
    before = dict(stages.windows)
    boxes, scores = stages.ascend(inputs, start, options)
    want_boxes, want_scores = ascend(whole_maps(stages, inputs), start, **options._asdict())
    assert stages.windows["whole"] == before["whole"] + 1
    torch.testing.assert_close(boxes, want_boxes, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(scores, want_scores, **TOL)
    assert (boxes - start).abs().max() > 20
