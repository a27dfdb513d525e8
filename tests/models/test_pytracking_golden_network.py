"""A converted pytracking DiMP-50 network computes what pytracking's own network computes.

``tests/golden/pytracking_network.npz`` holds pytracking's ``dimpnet50`` outputs for seeded weights
(:mod:`tests.golden.seeded`) on three 128-pixel crops, made by running pytracking's code on the CPU with this
toolkit's PrRoIPool in place of its CUDA one; regenerate it with
``python scripts/pytracking_golden.py network --pytracking PATH`` (see ``scripts/golden/network.py``). This
test rebuilds the same weights, writes them in pytracking's file layout, converts the file with
:mod:`ltr.admin.import_pytracking` and compares this toolkit's network with the golden numbers, both as built
from the config (BatchNorm as layers) and as the tracker loads it (BatchNorm folded into the convolutions).

Tolerance: float32 rounding. Both sides run the same float32 arithmetic, in different operation orders where
the implementations differ (the filter correlation as matrix products here and as a convolution there,
BatchNorm folded into the convolutions in the tracker's network), which changes each result by about one
float32 rounding step per operation. The test allows 3e-5 of each array's largest value (1e-4 for the box
gradients, which are differences of pooled features): room for those roundings to accumulate over the ~60
layers and the optimizer's divisions, and still far below what a wrong key, layer or convention changes
(1e-2 and more).
"""

from __future__ import annotations

import io
import json
import pickletools
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ltr.admin.checkpoint import load_checkpoint
from ltr.admin.import_pytracking import (
    PRESETS,
    Constructor,
    check_constructor,
    convert,
    net_config,
)
from ltr.models.tracking import DiMPNet, build_dimpnet
from pytracking.tracker.dimp.network import load_network
from pytracking.tracker.dimp.params import geometry_from_train_config
from tests.golden.pytracking_format import write_pytracking_checkpoint
from tests.golden.seeded import seeded_crops, seeded_tensor

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "pytracking_network.npz"
#: entries the converter drops: zeros here (their names and shapes are pytracking's, their values unused)
DROPPED = ("feature_extractor.layer4.", "feature_extractor.fc.")
TOLERANCE = {"box_grads": 1e-4}
DEFAULT_TOLERANCE = 3e-5


@pytest.fixture(scope="module")
def golden() -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    return arrays, json.loads(str(arrays.pop("meta")))


@pytest.fixture(scope="module")
def converted(golden, tmp_path_factory) -> Path:
    """pytracking's DiMP-50 file of the seeded weights, converted (a ResNet-50: a few seconds)."""
    arrays, meta = golden
    seed = meta["inputs"]["seed"]
    state = {}
    for i, (key, shape) in enumerate(meta["state_keys"]):
        if key.startswith(DROPPED):
            state[key] = torch.zeros(()).expand(shape)  # the real name and shape, one stored element
            continue
        state[key] = seeded_tensor(seed, key, shape)
        assert float(state[key].double().sum()) == pytest.approx(
            arrays["state_sums"][i], rel=1e-9, abs=1e-9
        ), f"tests/golden/seeded.py no longer gives the weights the golden file was made with ({key})"
    tmp = tmp_path_factory.mktemp("pytracking")
    ctor = meta["constructors"]["dimp50"]
    src = write_pytracking_checkpoint(
        tmp / "dimp50.pth", state, ctor["kwds"], fun_name=ctor["fun_name"], fun_module=ctor["fun_module"]
    )
    globals_here = _pickle_globals(src)
    dst = convert(src, tmp / "dimp50_converted.pth.tar")
    src.unlink()
    # the file written here names the same classes as the one pytracking's own trainer wrote
    assert globals_here == meta["pickle_globals"]["dimp50"]
    return dst


def _pickle_globals(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        data = archive.read(next(n for n in archive.namelist() if n.endswith("/data.pkl")))
    found = {
        str(arg).replace(" ", ".")
        for op, arg, _ in pickletools.genops(io.BytesIO(data))
        if op.name == "GLOBAL"
    }
    return sorted(found)


def _unfolded(path: Path) -> DiMPNet:
    with torch.device("meta"):  # no random initialisation: every tensor comes from the file
        net = build_dimpnet(net_config(PRESETS["dimp50"]))
    net.load_state_dict(load_checkpoint(path)["net"], assign=True)
    return net.eval()


NETS: dict[str, Callable[[Path], DiMPNet]] = {
    "batchnorm_layers": _unfolded,
    "tracker_folded": lambda path: load_network(path).net,
}


def our_outputs(net: DiMPNet, meta: dict[str, Any]) -> dict[str, np.ndarray]:
    """The golden file's quantities, computed by this toolkit's network (layout as the script records)."""
    inputs, subsets = meta["inputs"], meta["subsets"]
    crops = seeded_crops(inputs["seed"], inputs["image_size"], inputs["crop_size"], inputs["corners"])
    boxes = torch.tensor(inputs["train_boxes"]).reshape(-1, 1, 4)
    n = boxes.shape[0]
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        feats = net.extract_backbone_features(crops)
        for layer in ("layer2", "layer3"):
            out[f"{layer}_sub"] = feats[layer][:, :: subsets[layer]]
            out[f"{layer}_mean"] = feats[layer].mean(dim=(2, 3))
        clf = net.classifier.extract_features(feats["layer3"])  # (N, C, H, W)
        out["clf_sub"] = clf[:, :: subsets["clf"]]
        out["clf_mean"] = clf.mean(dim=(2, 3))
        train, test = clf[:n, None], clf[n:, None]  # (S, B=1, C, H, W)
        w0 = net.classifier.initial_filter(train, boxes)
        out["init_filter"] = w0[:, :: subsets["filter"]]
        for prefix, weight in (("", None), ("weighted_", torch.tensor(inputs["sample_weight"])[:, None])):
            result = net.classifier.optimizer(
                w0, train, boxes, sample_weight=weight, num_iter=inputs["num_iter"], compute_losses=True
            )
            out[f"{prefix}filter"] = result.filters[:, :: subsets["filter"]]
            out[f"{prefix}losses"] = 2.0 * result.losses  # pytracking's objective has no 1/2
            out[f"{prefix}scores"] = torch.stack([net.classifier.classify(w, test) for w in result.iterates])
        box = net.box_head
        modulation = box.get_modulation([feats["layer2"][:1], feats["layer3"][:1]], boxes[0])
        out["modulation2"], out["modulation3"] = modulation
        test_feats = box.get_test_features([feats["layer2"][n:], feats["layer3"][n:]])
        out["test_feat2_sub"] = test_feats[0][:, :: subsets["test_feat2"]]
        out["test_feat3_sub"] = test_feats[1][:, :: subsets["test_feat3"]]
    proposals = torch.tensor(inputs["proposals"])[None].requires_grad_(True)
    scores = box.score(modulation, test_feats, proposals)
    scores.sum().backward()
    out["box_scores"] = scores
    out["box_grads"] = proposals.grad
    return {k: v.detach().numpy() for k, v in out.items()}


@pytest.mark.parametrize("kind", list(NETS))
def test_network_outputs_equal_pytrackings(golden, converted, kind):
    arrays, meta = golden
    ours = our_outputs(NETS[kind](converted), meta)
    expected_keys = set(arrays) - {"state_sums"}
    assert set(ours) == expected_keys
    for key in sorted(expected_keys):
        want = arrays[key]
        got = ours[key].reshape(want.shape)
        scale = float(np.abs(want).max())
        error = float(np.abs(got - want).max())
        tol = TOLERANCE.get(key, DEFAULT_TOLERANCE)
        assert error <= tol * scale, (
            f"{kind} {key}: max |ours - pytracking| = {error:.3g} > {tol:g} x {scale:.3g}"
        )


def test_converted_file_is_the_dimp50_preset(golden, converted):
    ckpt = load_checkpoint(converted)
    assert ckpt["setting"] == "pytracking/dimp50" and ckpt["imported_from"]["dropped_tensors"] == sum(
        key.startswith(DROPPED) for key, _ in golden[1]["state_keys"]
    )
    assert len(ckpt["net"]) == 345
    geometry = geometry_from_train_config(ckpt["config"])
    assert (geometry.crop_size, geometry.search_area_factor, geometry.crop_mode) == (288, 5.0, "replicate")


@pytest.mark.parametrize("preset", ["dimp50", "super_dimp"])
def test_pytrackings_own_constructors_pass_the_preset_checks(golden, preset):
    """The constructors pytracking's model_constructor recorded for its train settings' arguments."""
    ctor = golden[1]["constructors"][preset]
    constructor = Constructor(ctor["fun_name"], ctor["fun_module"], tuple(ctor["args"]), ctor["kwds"])
    for name in ("dimp50", "super_dimp"):  # the same network: either preset accepts either file
        check_constructor(constructor, PRESETS[name], f"{preset}.pth")
