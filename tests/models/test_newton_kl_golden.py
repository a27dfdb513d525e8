"""PrDiMP's filter optimizer, softmax and classifier against pytracking's own outputs.

The numbers in ``tests/golden/prdimp_classifier.npz`` come from running pytracking's
``PrDiMPSteepestDescentNewton``, ``softmax_reg`` and a ``klcedimpnet50`` classifier at small widths on seeded
inputs; regenerate them with ``python scripts/pytracking_golden.py prdimp --pytracking PATH`` (see
``scripts/golden/prdimp.py``). Tolerances are float32 rounding: both sides run the same float32 formulas in
different operation orders.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.models.target_classifier import (
    ClassifierFeatureHead,
    FilterInitializer,
    LinearFilterClassifier,
    SteepestDescentNewtonKL,
    softmax_reg,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "prdimp_classifier.npz"
CASES = ["prdimp50", "prdimp50_weighted", "softmax_reg_options", "one_hot_label"]
#: pytracking's classifier state-dict keys (LinearFilter of klcedimpnet50) -> ours (LinearFilterClassifier).
CLASSIFIER_KEYS = {
    "feature_extractor.0.weight": "feature_head.conv.weight",
    "filter_initializer.filter_conv.weight": "initializer.conv.weight",
    "filter_initializer.filter_conv.bias": "initializer.conv.bias",
    "filter_optimizer.log_step_length": "optimizer.log_step_length",
    "filter_optimizer.filter_reg": "optimizer.filter_reg",
}


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def _t(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(array))


def _optimizer(config: dict) -> SteepestDescentNewtonKL:
    opt = SteepestDescentNewtonKL(
        num_iter=config["num_iter"],
        feature_stride=config["feature_stride"],
        init_filter_reg=config["init_filter_reg"],
        min_filter_reg=config["min_filter_reg"],
        label_sigma=config["gauss_sigma"],
        alpha_eps=config["alpha_eps"],
        normalize_label=config["normalize_label"],
        label_threshold=config.get("label_threshold", 0.0),
        label_shrink=config.get("label_shrink", 0.0),
        uniform_weight=config.get("init_uni_weight") or 0.0,
        softmax_reg=config.get("softmax_reg"),
    )
    with torch.no_grad():
        opt.log_step_length.fill_(config["log_step_length"])
    return opt


@pytest.mark.parametrize("case", CASES)
def test_optimizer_matches_pytracking(golden, case):
    g = {key.split("__", 1)[1]: value for key, value in golden.items() if key.startswith(f"{case}__")}
    config = json.loads(str(g["config"]))
    opt = _optimizer(config)
    features = _t(g["features"]).requires_grad_(True)
    filters = _t(g["filter"]).requires_grad_(True)
    boxes = _t(g["boxes"])
    weight = _t(g["sample_weight"]) if "sample_weight" in g else None
    k = filters.shape[-1]
    size = (features.shape[-2] + 1 - k % 2, features.shape[-1] + 1 - k % 2)

    torch.testing.assert_close(opt.label_density(boxes, size, k), _t(g["label"]), rtol=1e-5, atol=1e-7)
    result = opt(filters, features, boxes, sample_weight=weight, compute_losses=True)
    iterates = torch.stack(result.iterates)
    torch.testing.assert_close(iterates.detach(), _t(g["iterates"]), rtol=1e-5, atol=1e-5)
    # pytracking's loss has lambda |w|^2 where ours (whose gradient is the step direction) has lambda/2 |w|^2
    reg = max(opt.filter_reg.item() ** 2, opt.min_filter_reg**2)
    extra = 0.5 * reg * iterates.detach().pow(2).sum(dim=(1, 2, 3, 4)) / filters.shape[0]
    torch.testing.assert_close(result.losses + extra, _t(g["losses"]), rtol=1e-5, atol=1e-6)

    objective = (result.filters * _t(g["probe"])).sum()
    grads = torch.autograd.grad(objective, [opt.log_step_length, opt.filter_reg, filters, features])
    names = ["grad_log_step_length", "grad_filter_reg", "grad_filter", "grad_features"]
    for grad, name in zip(grads, names, strict=True):
        expected = _t(g[name])
        torch.testing.assert_close(
            grad, expected, rtol=1e-4, atol=1e-5 * expected.abs().max().item(), msg=name
        )


def test_softmax_reg_matches_pytracking(golden):
    scores = _t(golden["softmax__scores"])
    for tag, reg in json.loads(str(golden["softmax__config"])).items():
        ours = softmax_reg(scores, dim=(-2, -1), reg=reg)
        torch.testing.assert_close(ours, _t(golden[f"softmax__{tag}"]), rtol=1e-5, atol=1e-8, msg=tag)
        flat = softmax_reg(scores.flatten(-2), dim=-1, reg=reg).reshape(scores.shape)
        torch.testing.assert_close(flat, ours, rtol=1e-6, atol=1e-9)


def test_prdimp_classifier_matches_pytracking(golden):
    config = json.loads(str(golden["classifier__config"]))
    k = config["filter_size"]
    clf = LinearFilterClassifier(
        feature_head=ClassifierFeatureHead(
            in_channels=config["in_dim"], out_channels=config["out_dim"], filter_size=k
        ),
        initializer=FilterInitializer(channels=config["out_dim"], filter_size=k, feature_stride=16),
        optimizer=SteepestDescentNewtonKL(num_iter=config["num_iter"], feature_stride=16),
        filter_size=k,
    )
    prefix = "classifier__param__"
    theirs = {key[len(prefix) :]: _t(value) for key, value in golden.items() if key.startswith(prefix)}
    assert set(theirs) == set(CLASSIFIER_KEYS)
    clf.load_state_dict({CLASSIFIER_KEYS[key]: value for key, value in theirs.items()}, strict=True)
    clf.eval()
    with torch.no_grad():
        out = clf(
            _t(golden["classifier__train_feats"]),
            _t(golden["classifier__test_feats"]),
            _t(golden["classifier__train_boxes"]),
        )
    expected = _t(golden["classifier__scores"])
    assert out.scores.shape == expected.shape
    torch.testing.assert_close(out.scores, expected, rtol=1e-4, atol=1e-5 * expected.abs().max().item())
    # the optimizer moved the scores (the comparison is not only of the initial filter)
    assert (expected[-1] - expected[0]).abs().max() > 0.1 * expected.abs().max()
    assert math.isclose(clf.optimizer.filter_reg.item(), 0.08, rel_tol=1e-6)
