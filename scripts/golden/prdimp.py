"""PrDiMP's filter optimizer, regularised softmax and classifier, from pytracking.

Runs pytracking's own ``PrDiMPSteepestDescentNewton``, ``softmax_reg`` and a PrDiMP-50 classifier (the
``klcedimpnet50`` composition at small widths) on seeded inputs, and writes their inputs and outputs, which
``tests/models/test_newton_kl_golden.py`` compares with this toolkit's modules. Only the pooling inside the
classifier's filter initializer is this toolkit's (see :mod:`scripts.golden.reference`).

Layout of the file: every array is ``<case>__<name>``; ``<case>__config`` is a JSON string with the case's
hyper-parameters. Losses are pytracking's (regulariser ``lambda |w|^2``, where this toolkit's objective has
``lambda/2 |w|^2``; the test converts).
"""

from __future__ import annotations

import argparse
import json
import math
import types
from typing import Any

import numpy as np
import torch

from scripts.golden.reference import import_reference

OUT = "prdimp_classifier.npz"

#: Optimizer cases: (name, constructor arguments of pytracking's optimizer, sequences, sample weights given,
#: filter size, feature map size).
OPTIMIZER_CASES: list[tuple[str, dict[str, Any], int, bool, int, int]] = [
    (
        "prdimp50",
        dict(
            init_filter_reg=0.05, min_filter_reg=0.05, gauss_sigma=0.9, alpha_eps=0.05, normalize_label=True
        ),
        1,
        False,
        4,
        6,
    ),
    (
        "prdimp50_weighted",
        dict(
            init_filter_reg=0.05, min_filter_reg=0.05, gauss_sigma=0.9, alpha_eps=0.05, normalize_label=True
        ),
        2,
        True,
        4,
        6,
    ),
    (
        "softmax_reg_options",
        dict(
            init_filter_reg=0.2,
            min_filter_reg=1e-3,
            gauss_sigma=1.3,
            alpha_eps=0.0,
            normalize_label=False,
            softmax_reg=-0.7,
            init_uni_weight=0.1,
            label_shrink=0.05,
            label_threshold=0.01,
        ),
        2,
        True,
        3,
        7,
    ),
    (
        "one_hot_label",
        dict(
            init_filter_reg=0.05, min_filter_reg=0.05, gauss_sigma=0.0, alpha_eps=0.05, normalize_label=True
        ),
        1,
        True,
        4,
        6,
    ),
]
NUM_IMAGES = 3
CHANNELS = 8
NUM_ITER = 4
STRIDE = 16


def _boxes(gen: torch.Generator, shape: tuple[int, ...], image: int) -> torch.Tensor:
    """xywh boxes of 16-48 px whose centres lie inside the middle of an ``image``-pixel square."""
    size = 16 + 32 * torch.rand(*shape, 2, generator=gen)
    centre = image * (0.3 + 0.4 * torch.rand(*shape, 2, generator=gen))
    return torch.cat([centre - size / 2, size], dim=-1)


def optimizer_cases(pt: types.SimpleNamespace, out: dict[str, np.ndarray]) -> None:
    """Filter iterates, losses and parameter gradients of pytracking's PrDiMPSteepestDescentNewton."""
    for index, (name, kwargs, num_seq, weighted, k, fsz) in enumerate(OPTIMIZER_CASES):
        gen = torch.Generator().manual_seed(100 + index)
        scale = math.sqrt(1.0 / (CHANNELS * k * k))
        feat = scale * torch.randn(NUM_IMAGES, num_seq, CHANNELS, fsz, fsz, generator=gen)
        filt = torch.randn(num_seq, CHANNELS, k, k, generator=gen)
        boxes = _boxes(gen, (NUM_IMAGES, num_seq), fsz * STRIDE)
        weights = None
        if weighted:
            weights = torch.rand(NUM_IMAGES, num_seq, generator=gen) + 0.1
            weights = weights / weights.sum(0, keepdim=True)
        log_step = math.log(0.6 + 0.8 * torch.rand((), generator=gen).item())
        reg = kwargs["init_filter_reg"] * (0.8 + 0.6 * torch.rand((), generator=gen).item())
        opt = pt.optimizer.PrDiMPSteepestDescentNewton(
            num_iter=NUM_ITER, feat_stride=STRIDE, init_step_length=1.0, **{**kwargs, "init_filter_reg": reg}
        )
        with torch.no_grad():
            opt.log_step_length.fill_(log_step)
        opt.train()
        feat_p = feat.clone().requires_grad_(True)
        filt_p = filt.clone().requires_grad_(True)
        final, iterates, losses = opt(
            filt_p, feat=feat_p, bb=boxes, sample_weight=weights, num_iter=NUM_ITER, compute_losses=True
        )
        probe = torch.randn(final.shape, generator=gen)
        objective = (final * probe).sum()
        grads = torch.autograd.grad(objective, [opt.log_step_length, opt.filter_reg, filt_p, feat_p])
        label = opt.get_label_density(
            ((boxes[..., :2] + boxes[..., 2:] / 2) / STRIDE).flip((-1,)) - (k % 2) / 2.0,
            (fsz + (k + 1) % 2, fsz + (k + 1) % 2),
        )
        config = {
            **kwargs,
            "init_filter_reg": reg,
            "log_step_length": log_step,
            "num_iter": NUM_ITER,
            "feature_stride": STRIDE,
        }
        arrays = {
            "config": np.array(json.dumps(config, sort_keys=True)),
            "features": feat,
            "filter": filt,
            "boxes": boxes,
            "iterates": torch.stack([w.detach() for w in iterates]),
            "losses": torch.stack([loss.detach().reshape(()) for loss in losses]),
            "label": label.reshape(NUM_IMAGES, num_seq, *label.shape[-2:]),
            "probe": probe,
            "grad_log_step_length": grads[0],
            "grad_filter_reg": grads[1],
            "grad_filter": grads[2],
            "grad_features": grads[3],
        }
        if weights is not None:
            arrays["sample_weight"] = weights
        for key, value in arrays.items():
            out[f"{name}__{key}"] = value if isinstance(value, np.ndarray) else value.detach().numpy()


def softmax_case(pt: types.SimpleNamespace, out: dict[str, np.ndarray]) -> None:
    """pytracking's softmax_reg over the flattened cells of score maps, without and with a regulariser."""
    gen = torch.Generator().manual_seed(7)
    scores = 3.0 * torch.randn(2, 3, 5, 5, generator=gen)
    out["softmax__scores"] = scores.numpy()
    for tag, reg in (("none", None), ("reg", -0.5), ("reg_high", 4.0)):
        flat = scores.reshape(2, 3, -1)
        result = pt.activation.softmax_reg(flat, dim=2, reg=reg).reshape(scores.shape)
        out[f"softmax__{tag}"] = result.numpy()
    out["softmax__config"] = np.array(json.dumps({"none": None, "reg": -0.5, "reg_high": 4.0}))


def classifier_case(pt: types.SimpleNamespace, out: dict[str, np.ndarray]) -> None:
    """PrDiMP-50's classifier (klcedimpnet50: feature head, linear initializer, Newton optimizer) at small
    widths: its parameters, inputs, the test scores of every filter iterate."""
    torch.manual_seed(11)
    in_dim, out_dim, k, num_iter = 32, 16, 4, 5
    head = pt.features.residual_bottleneck(
        feature_dim=in_dim // 4,
        num_blocks=0,
        l2norm=True,
        final_conv=True,
        norm_scale=math.sqrt(1.0 / (out_dim * k * k)),
        out_dim=out_dim,
        final_relu=False,
    )
    init = pt.initializer.FilterInitializerLinear(
        filter_size=k, filter_norm=False, feature_dim=out_dim, init_weights="default"
    )
    opt = pt.optimizer.PrDiMPSteepestDescentNewton(
        num_iter=num_iter,
        feat_stride=STRIDE,
        init_step_length=1.0,
        init_filter_reg=0.05,
        gauss_sigma=0.9,
        min_filter_reg=0.05,
        alpha_eps=0.05,
        normalize_label=True,
    )
    clf = pt.linear_filter.LinearFilter(
        filter_size=k, filter_initializer=init, filter_optimizer=opt, feature_extractor=head
    )
    gen = torch.Generator().manual_seed(12)
    with (
        torch.no_grad()
    ):  # trained-looking, not default, values for the parameters the defaults leave at 0 or 1
        init.filter_conv.bias.copy_(0.1 * torch.randn(out_dim, generator=gen))
        opt.log_step_length.fill_(math.log(0.85))
        opt.filter_reg.fill_(0.08)
    clf.eval()
    fsz = 6
    train = torch.randn(3, 1, in_dim, fsz, fsz, generator=gen)
    test = torch.randn(2, 1, in_dim, fsz, fsz, generator=gen)
    boxes = _boxes(gen, (3, 1), fsz * STRIDE)
    with torch.no_grad():
        scores = clf(train, test, boxes)
    for key, value in clf.state_dict().items():
        out[f"classifier__param__{key}"] = value.numpy()
    out["classifier__train_feats"] = train.numpy()
    out["classifier__test_feats"] = test.numpy()
    out["classifier__train_boxes"] = boxes.numpy()
    out["classifier__scores"] = torch.stack(scores).numpy()
    config = {"in_dim": in_dim, "out_dim": out_dim, "filter_size": k, "num_iter": num_iter}
    out["classifier__config"] = np.array(json.dumps(config, sort_keys=True))


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    pt = import_reference(
        args.pytracking,
        optimizer="ltr.models.target_classifier.optimizer",
        activation="ltr.models.layers.activation",
        features="ltr.models.target_classifier.features",
        initializer="ltr.models.target_classifier.initializer",
        linear_filter="ltr.models.target_classifier.linear_filter",
    )
    out: dict[str, np.ndarray] = {}
    optimizer_cases(pt, out)
    softmax_case(pt, out)
    classifier_case(pt, out)
    return out
