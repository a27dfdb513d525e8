"""int8 by static quantisation calibrated on synthetic frames, and dynamic for the linear layers (slow: uses
the session's tiny export).

Tolerance: on held-out inputs (the synthetic test split; calibrated on val) the quantised convolutional models'
output errors are on average below 10% of the float32 outputs' root mean square, each below 25% (int8
activations, 7-bit weights, a random network); the score-and-gradient model with int8 linear layers gives f
within 5% of the largest |f| and a gradient at cosine similarity above 0.99 to float32's; the other models are
unchanged; a sequence tracks on them."""

import dataclasses
import shutil

import numpy as np
import pytest
import torch

from ltr.admin.config import apply_overrides
from pytracking.export_onnx import main as export_main
from pytracking.onnx.export import TABLES, example_inputs
from pytracking.onnx.manifest import file_sha256, read_manifest
from pytracking.onnx.quantize import DYNAMIC, QUANTIZED, calibration_inputs, quantize_export
from pytracking.onnx.runtime import OrtStages
from pytracking.parameter.dimp import get_parameters
from pytracking.tracker.dimp import DiMPTracker, load_network
from tests.onnx.conftest import OPENED, REFINE
from tests.tracker.helpers import random_frame

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def int8(tiny_export, tmp_path_factory):
    folder = tmp_path_factory.mktemp("int8") / "export"
    shutil.copytree(tiny_export.folder, folder)
    loaded = load_network(tiny_export.checkpoint)
    params = apply_overrides(get_parameters("nce_plus_tiny"), OPENED + REFINE)
    quantize_export(folder, loaded, params, dataset="synthetic:val", num_frames=8)
    return loaded, params, folder


def test_manifest_of_the_int8_export(tiny_export, int8):
    folder = int8[2]
    manifest, before = read_manifest(folder), read_manifest(tiny_export.folder)
    assert manifest.precision == "int8" and before.precision == "float32"
    assert manifest.calibration == {
        "dataset": "synthetic:val",
        "frames": 8,
        "models": list(QUANTIZED),
        "dynamic": list(DYNAMIC),
    }
    for name, entry in manifest.models.items():
        assert file_sha256(folder / entry.file) == entry.sha256
        assert (entry.sha256 != before.models[name].sha256) == (name in QUANTIZED + DYNAMIC)
    with pytest.raises(ValueError, match="already int8"):
        quantize_export(folder, *int8[:2])


def test_int8_models_stay_close_to_float32_and_track(tiny_export, int8):
    loaded, params, folder = int8
    fp32 = OrtStages(tiny_export.folder, read_manifest(tiny_export.folder))
    q = OrtStages(folder, read_manifest(folder))
    # held-out inputs: what the models see tracking the synthetic test split (calibrated on val)
    held_out = calibration_inputs(tiny_export.folder, loaded, params, dataset="synthetic:test", num_frames=6)
    for model in QUANTIZED:
        errors = []
        for feed in held_out[model]:
            for got, want in zip(
                q.sessions[model].run(None, feed), fp32.sessions[model].run(None, feed), strict=True
            ):
                errors.append(np.sqrt(((got - want) ** 2).mean() / (want**2).mean()))
        assert 0 < np.mean(errors) < 0.1 and np.max(errors) < 0.25, (model, errors)
    # the score-and-gradient model: int8 linear layers, quantised per call; f and the ascent's direction kept
    x = example_inputs(loaded, num_boxes=10, seed=3)
    tables = [x[k] for k in TABLES]
    (f_q, g_q), (f, g) = (s.run("box_score_grad", *tables, x["boxes"]) for s in (q, fp32))
    assert 0 < (f_q - f).abs().max() < 0.05 * f.abs().max()
    cosine = torch.nn.functional.cosine_similarity(g_q.flatten(), g.flatten(), dim=0)
    assert cosine > 0.99, cosine
    tracker = DiMPTracker(
        loaded.net, loaded.geometry, dataclasses.replace(params, backend="onnxruntime", onnx_dir=str(folder))
    )
    assert tracker.stages.manifest.precision == "int8"  # not the float32 sessions calibration opened here
    rng = np.random.default_rng(0)
    tracker.initialize(random_frame(rng, 120, 160), [60.0, 40.0, 24.0, 20.0])
    boxes = np.stack([tracker.track(random_frame(rng, 120, 160)) for _ in range(5)])
    assert np.isfinite(boxes).all()


def test_export_command_with_int8_and_an_unknown_calibration_dataset(tiny_export, tmp_path, capsys):
    argv = [
        "dimp",
        "nce_plus_tiny",
        "--net",
        str(tiny_export.checkpoint),
        "--out",
        str(tmp_path / "o"),
        "--int8",
    ]
    assert export_main([*argv, "--calibrate-on", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "nowhere" in err[0]
    assert not (tmp_path / "o").exists()


def test_fixed_features_stay_float32(tiny_export, int8):
    import onnx

    from pytracking.onnx.quantize import appended_branch

    loaded, params, folder = int8
    assert set(loaded.net.backbone.fixed_channels) == {"layer2", "layer3"}  # the tiny setting's network
    model = onnx.load(str(tiny_export.folder / "backbone.onnx"))
    for layer in ("layer2", "layer3"):
        ops = {n.op_type for n in model.graph.node if n.name in appended_branch(model, layer)}
        assert {"Sqrt", "Div", "Concat"} <= ops and "MaxPool" not in ops  # the fixed features, not the ResNet
    fp32 = OrtStages(tiny_export.folder, read_manifest(tiny_export.folder))
    q = OrtStages(folder, read_manifest(folder))
    feeds = calibration_inputs(tiny_export.folder, loaded, params, dataset="synthetic:test", num_frames=2)
    for layer, fixed in loaded.net.backbone.fixed_channels.items():
        for feed in feeds["backbone"]:
            (got,) = q.sessions["backbone"].run([layer], feed)
            (want,) = fp32.sessions["backbone"].run([layer], feed)
            # only the int8 image they share with the ResNet's first conv separates them (the learned
            # channels carry the int8 error bounded in the test above)
            tail, ref = got[:, -fixed:], want[:, -fixed:]
            err = np.sqrt(((tail - ref) ** 2).mean() / (ref**2).mean())
            assert err < 0.02, (layer, err)
            assert np.abs(got[:, :-fixed] - want[:, :-fixed]).max() > 1e-3  # the learned channels are int8


def test_instance_norm_scales_are_quantised_per_channel(int8):
    import onnx
    from onnx.numpy_helper import to_array

    loaded, _, folder = int8
    assert loaded.net.backbone.norm == "ibn"  # the tiny setting's network: IBN-a
    model = onnx.load(str(folder / read_manifest(folder).models["backbone"].file))
    inits = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    norms = [n for n in model.graph.node if n.op_type == "InstanceNormalization"]
    assert len(norms) == 6  # one per residual block of layer1-layer3
    for node in norms:
        dq = producer[node.input[1]]  # the scale (C,), stored in int8 and dequantised
        weight, scale = inits[dq.input[0]], to_array(inits[dq.input[1]])
        assert dq.op_type == "DequantizeLinear" and weight.data_type == onnx.TensorProto.INT8
        assert scale.shape == tuple(weight.dims)  # one quantisation scale per channel, not per tensor
