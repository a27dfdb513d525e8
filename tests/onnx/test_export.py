"""Exported models against the PyTorch parts on new random inputs, the manifest, and whole sequences tracked
with the ONNX Runtime backend against the PyTorch tracker (slow: one export of a tiny network).

Tolerances (float32): every model output within rtol 1e-4 / atol 1e-5 of the PyTorch part's; tracked boxes
within 0.05 pixel of the PyTorch tracker's on 64-pixel crops."""

import dataclasses
import json

import numpy as np
import onnx
import pytest
import torch

from eval.result_files import read_result_file
from ltr.admin.config import apply_overrides
from pytracking.onnx import parts
from pytracking.onnx.export import MODEL_NAMES, OPSET, example_inputs
from pytracking.onnx.manifest import file_sha256, read_manifest, weights_sha256
from pytracking.onnx.runtime import OrtStages
from pytracking.parameter.dimp import get_parameters
from pytracking.run_tracker import main as run_tracker
from pytracking.tracker.dimp import DiMPTracker, load_network
from tests.dataset.fixtures import make_folder_sequence
from tests.onnx.conftest import OPENED, REFINE
from tests.tracker.helpers import random_frame

pytestmark = pytest.mark.slow
TOL = {"rtol": 1e-4, "atol": 1e-5}


@pytest.fixture(scope="module")
def setup(tiny_export):
    loaded = load_network(tiny_export.checkpoint)
    params = apply_overrides(get_parameters("nce_plus_tiny"), OPENED + REFINE)
    ort_params = dataclasses.replace(params, backend="onnxruntime", onnx_dir=str(tiny_export.folder))
    stages = OrtStages.open(tiny_export.folder, loaded.net, loaded.geometry, ort_params)
    return loaded, params, ort_params, stages


def test_manifest_names_every_checked_model_its_shapes_and_its_source(tiny_export, setup):
    loaded = setup[0]
    manifest = read_manifest(tiny_export.folder)
    raw = json.loads((tiny_export.folder / "manifest.json").read_text())
    assert raw["format"] == "ebmtrack-onnx" and raw["opset"] == OPSET
    assert manifest.checkpoint["sha256"] == file_sha256(tiny_export.checkpoint)
    assert manifest.weights_sha256 == weights_sha256(loaded.net)
    assert manifest.geometry_object() == loaded.geometry and manifest.num_boxes == 10
    assert set(raw["versions"]) >= {"torch", "onnx"}
    assert list(manifest.models) == list(MODEL_NAMES)
    for entry in manifest.models.values():
        path = tiny_export.folder / entry.file
        assert file_sha256(path) == entry.sha256
        onnx.checker.check_model(str(path), full_check=True)
    assert manifest.models["backbone"].inputs == {"images": ["batch", 3, 64, 64]}
    assert manifest.models["box_score_grad"].outputs == {"scores": [1, 10], "grad": [1, 10, 4]}
    assert manifest.models["filter_step"].inputs["weights"] == ["samples"]
    # the box features and their tables take a window of the maps, cut as box_window says
    assert manifest.models["box_features"].inputs["layer2"][2:] == ["h2", "w2"]
    assert manifest.models["box_tables"].outputs["table3"][1:3] == ["h3 + 1", "w3 + 1"]
    assert manifest.box_window == {"strides": [8, 16], "halos": [2, 2]}
    assert not list(tiny_export.folder.glob("*.tmp")) and not list(tiny_export.folder.glob("*.data"))


def test_every_model_gives_the_pytorch_parts_outputs_on_new_inputs(setup):
    loaded, _, _, stages = setup
    net = loaded.net
    x = example_inputs(loaded, num_boxes=10, seed=7)  # not the export's inputs
    with torch.no_grad():
        for batch in (1, 3):  # dynamic batch
            images = torch.randn(batch, 3, 64, 64)
            for got, want in zip(
                stages.run("backbone", images), parts.BackboneFeatures(net)(images), strict=True
            ):
                torch.testing.assert_close(got, want, **TOL)
        torch.testing.assert_close(
            stages.run("clf_features", x["layer3"])[0], parts.ClassifierFeatures(net)(x["layer3"]), **TOL
        )
        torch.testing.assert_close(
            stages.run("clf_scores", x["filters"], x["features"])[0],
            parts.ClassifierScores(net)(x["filters"], x["features"]),
            **TOL,
        )
        pairs = [
            ("box_features", parts.BoxTestFeatures(net), ("layer2", "layer3", "mod2", "mod3")),
            ("modulation", parts.Modulation(net), ("layer2", "layer3", "box")),
            ("initial_filter", parts.InitialFilter(net), ("samples", "sample_boxes")),
        ]
        for name, module, keys in pairs:
            want = module(*[x[k] for k in keys])
            for got, ref in zip(
                stages.run(name, *[x[k] for k in keys]),
                want if isinstance(want, tuple) else [want],
                strict=True,
            ):
                torch.testing.assert_close(got, ref, **TOL)
        modulated = (x["mod_feat2"], x["mod_feat3"])
        tables = stages.run("box_tables", *modulated)
        for got, ref in zip(tables, parts.BoxTables()(*modulated), strict=True):
            torch.testing.assert_close(got, ref, **TOL)
        scores, grad = stages.run("box_score_grad", *tables, x["boxes"])
        with torch.enable_grad():
            boxes = x["boxes"].clone().requires_grad_(True)
            f = net.box_head.score_modulated(modulated, boxes)
            (g,) = torch.autograd.grad(f.sum(), boxes)
        torch.testing.assert_close(scores, f.detach(), **TOL)
        torch.testing.assert_close(grad, g, rtol=1e-3, atol=1e-6)
        for s in (1, 3, 7):  # dynamic number of samples
            feats, boxes, weights = (
                x["samples"].repeat(3, 1, 1, 1)[:s],
                x["sample_boxes"].repeat(3, 1)[:s],
                torch.rand(s),
            )
            want = net.classifier.optimizer(
                x["filters"], feats[:, None], boxes[:, None], sample_weight=weights[:, None], num_iter=1
            ).filters
            torch.testing.assert_close(
                stages.run("filter_step", x["filters"], feats, boxes, weights)[0], want, **TOL
            )


def test_tracking_with_onnxruntime_gives_the_pytorch_trackers_boxes(setup):
    loaded, params, ort_params, _ = setup
    rng = np.random.default_rng(3)
    frames = [random_frame(rng, 120, 160) for _ in range(30)]

    def track(p):
        tracker = DiMPTracker(loaded.net, loaded.geometry, p)
        tracker.initialize(frames[0], [60.0, 40.0, 24.0, 20.0])
        return tracker, np.stack([tracker.track(f) for f in frames[1:]])

    torch_tracker, want = track(params)
    ort_tracker, got = track(ort_params)
    assert type(ort_tracker.stages).__name__ == "OrtStages"
    assert DiMPTracker(loaded.net, loaded.geometry, ort_params).stages is ort_tracker.stages  # opened once
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05)
    assert np.abs(np.diff(want, axis=0)).max() > 1.0  # the boxes move: the comparison is not trivial
    torch.testing.assert_close(ort_tracker.filter, torch_tracker.filter, rtol=0, atol=5e-3)


def test_run_tracker_with_the_onnxruntime_backend(tiny_export, tmp_path):
    root = tmp_path / "data"
    make_folder_sequence(root, "alpha", [[3.0, 2.0, 6.0, 5.0]] * 8)
    common = ["--dataset", "folder", "--root", str(root), "--net", str(tiny_export.checkpoint)]
    common += ["--results", str(tmp_path / "results"), "--device", "cpu", "--no-progress"]
    over = [*OPENED, *REFINE]
    assert run_tracker(["dimp", "nce_plus_tiny", *over, "--name", "pt", *common]) == 0
    ort = [f"onnx_dir={tiny_export.folder}", "backend=onnxruntime"]
    assert run_tracker(["dimp", "nce_plus_tiny", *over, *ort, "--name", "ort", *common]) == 0
    want = read_result_file(tmp_path / "results" / "dimp" / "pt" / "alpha.txt")
    got = read_result_file(tmp_path / "results" / "dimp" / "ort" / "alpha.txt")
    np.testing.assert_allclose(got, want, rtol=0, atol=0.05)


def test_run_video_with_the_onnxruntime_backend(tiny_export, tmp_path, capsys):
    from pytracking.run_video import main as run_video
    from tests.tracker.test_run_video import write_video

    video = write_video(tmp_path / "in.avi", 8, "MJPG", size=(96, 72))
    common = [str(video), *OPENED, *REFINE, "--init", "10,10,12,10", "--net", str(tiny_export.checkpoint)]
    runs = []
    for extra in ([], [f"onnx_dir={tiny_export.folder}", "backend=onnxruntime"]):
        assert run_video(["dimp", "nce_plus_tiny", *common, *extra, "--device", "cpu"]) == 0
        lines = capsys.readouterr().out.strip().splitlines()
        runs.append(np.array([[float(v) for v in line.split(",")[1:]] for line in lines]))
    assert runs[0].shape == (8, 4)
    np.testing.assert_allclose(runs[1], runs[0], rtol=0, atol=0.05)
    assert np.abs(runs[0][1:] - runs[0][0]).max() > 0.5  # the box moves: the comparison is not trivial


def test_prdimps_filter_optimizer_exports_too(tmp_path):
    import onnxruntime

    from pytracking.onnx.export import export_model
    from pytracking.tracker.dimp import random_network

    loaded = random_network("nce_plus_tiny", crop_size=64, net_fields={"filter_optimizer": "newton_kl"})
    x = example_inputs(loaded, num_boxes=2)
    step = parts.FilterSteps(loaded.net, 1).eval()
    names = ["filters", "features", "boxes", "weights"]
    samples = {0: "samples"}
    export_model(
        step,
        [x["filters"], x["samples"], x["sample_boxes"], x["weights"]],
        tmp_path / "step.onnx",
        input_names=names,
        output_names=["filters_out"],
        dynamic_axes={"features": samples, "boxes": samples, "weights": samples},
    )
    session = onnxruntime.InferenceSession(str(tmp_path / "step.onnx"))
    for s in (2, 5):
        args = [
            x["filters"],
            x["samples"].repeat(2, 1, 1, 1)[:s],
            x["sample_boxes"].repeat(2, 1)[:s],
            torch.rand(s),
        ]
        (got,) = session.run(None, {n: a.numpy() for n, a in zip(names, args, strict=True)})
        with torch.no_grad():
            torch.testing.assert_close(torch.from_numpy(got), step(*args), **TOL)
