"""pytracking's SuperDiMP training losses on fixed network outputs: ``KLDiMPActor``, ``LBHinge``, ``KLRegression``.

Runs pytracking's ``KLDiMPActor`` (``ltr/actors/tracking.py``) with SuperDiMP's objective and weights
(``ltr/train_settings/dimp/super_dimp.py``: ``LBHinge(threshold=0.05)`` on the classifier scores of every
filter iterate, weighted 100 for the initial filter, 400 spread over the intermediate iterates and 100 for the
final one; ``KLRegression()`` (KLD-IS) on the box scores, weighted 0.01) on the outputs of
:func:`tests.golden.loss_inputs.loss_inputs`, with the network replaced by one that returns those outputs. The
proposal and ground-truth densities are pytracking's (``gmm_density_centered`` / ``gauss_density_centered`` of
its ``processing_utils``, as ``sample_box_gmm`` computes them for the proposals' offsets, sigmas (0.05, 0.5) and
0.05). It records the actor's loss and stats, every iterate's ``LBHinge`` loss, the ``KLRegression`` loss and
the gradients of the total loss with respect to the box scores and (every second row and column) the
classifier scores. ``tests/actors/test_dimp_losses_golden.py`` compares this toolkit's losses and actor.

Layout: ``proposal_density`` / ``gt_density`` (3, 2, 128); ``clf_losses`` (6,); ``bb_ce``, ``total``;
``stats__<name>`` the actor's stats (``/`` in names as ``.``); ``grad_bb_scores`` (3, 2, 128);
``grad_target_scores`` (6, 3, 2, 12, 12) (rows and columns 0, 2, ..., 22); ``input_sums`` (the sums of the
inputs, to catch a changed input generator); ``config`` (JSON: seed and weights).
"""

from __future__ import annotations

import argparse
import json
import types

import numpy as np
import torch

from scripts.golden.reference import import_reference
from tests.golden.loss_inputs import loss_inputs

OUT = "training_losses.npz"
SEED = 0
LOSS_WEIGHT = {"bb_ce": 0.01, "test_clf": 100, "test_init_clf": 100, "test_iter_clf": 400}
PROPOSAL_SIGMA = [(0.05, 0.05), (0.5, 0.5)]
GT_SIGMA = (0.05, 0.05)
HINGE_THRESHOLD = 0.05


def densities(prutils: types.ModuleType, offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """pytracking's proposal and ground-truth densities of rel-space offsets (..., 4), as ``sample_box_gmm``."""
    center_std = torch.Tensor([s[0] for s in PROPOSAL_SIGMA])
    sz_std = torch.Tensor([s[1] for s in PROPOSAL_SIGMA])
    std = torch.stack([center_std, center_std, sz_std, sz_std])
    flat = offsets.reshape(-1, 4)
    proposal_density = prutils.gmm_density_centered(flat, std.view(1, 4, -1))
    std_gt = torch.Tensor([GT_SIGMA[0], GT_SIGMA[0], GT_SIGMA[1], GT_SIGMA[1]]).view(1, 4)
    gt_density = prutils.gauss_density_centered(flat, std_gt).prod(-1)
    return proposal_density.reshape(offsets.shape[:-1]), gt_density.reshape(offsets.shape[:-1])


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    ref = import_reference(
        args.pytracking,
        actors="ltr.actors.tracking",
        target_classification="ltr.models.loss.target_classification",
        kl_regression="ltr.models.loss.kl_regression",
        processing_utils="ltr.data.processing_utils",
        tensordict="pytracking.libs.tensordict",
    )
    inputs = loss_inputs(SEED)
    scores = torch.from_numpy(inputs["target_scores"]).requires_grad_(True)
    bb_scores = torch.from_numpy(inputs["bb_scores"]).requires_grad_(True)
    proposal_density, gt_density = densities(
        ref.processing_utils, torch.from_numpy(inputs["proposal_offsets"])
    )

    def net(**kwargs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        return list(scores), bb_scores

    objective = {
        "bb_ce": ref.kl_regression.KLRegression(),
        "test_clf": ref.target_classification.LBHinge(threshold=HINGE_THRESHOLD),
    }
    actor = ref.actors.KLDiMPActor(net=net, objective=objective, loss_weight=LOSS_WEIGHT)
    num_test, batch = inputs["test_boxes"].shape[:2]
    data = ref.tensordict.TensorDict(
        {
            "train_images": torch.zeros(3, batch, 3, 1, 1),
            "test_images": torch.zeros(num_test, batch, 3, 1, 1),
            "train_anno": torch.from_numpy(inputs["test_boxes"]),
            "test_anno": torch.from_numpy(inputs["test_boxes"]),
            "test_proposals": torch.from_numpy(inputs["proposals"]),
            "proposal_density": proposal_density,
            "gt_density": gt_density,
            "test_label": torch.from_numpy(inputs["test_label"]),
        }
    )
    loss, stats = actor(data)
    grad_scores, grad_bb = torch.autograd.grad(loss, [scores, bb_scores])
    with torch.no_grad():
        label = data["test_label"]
        clf_losses = torch.stack([objective["test_clf"](s, label, data["test_anno"]) for s in scores])
        bb_ce = objective["bb_ce"](
            bb_scores.reshape(-1, bb_scores.shape[-1]),
            sample_density=proposal_density.reshape(-1, bb_scores.shape[-1]),
            gt_density=gt_density.reshape(-1, bb_scores.shape[-1]),
            mc_dim=1,
        )
    out: dict[str, np.ndarray] = {
        "proposal_density": proposal_density.numpy(),
        "gt_density": gt_density.numpy(),
        "clf_losses": clf_losses.numpy(),
        "bb_ce": bb_ce.numpy(),
        "total": loss.detach().numpy(),
        "grad_bb_scores": grad_bb.numpy(),
        "grad_target_scores": grad_scores[..., ::2, ::2].numpy(),
        "input_sums": np.asarray([float(v.astype(np.float64).sum()) for v in inputs.values()]),
    }
    for name, value in stats.items():
        out["stats__" + name.replace("/", ".")] = np.asarray(value, np.float64)
    config = {"seed": SEED, "loss_weight": LOSS_WEIGHT, "hinge_threshold": HINGE_THRESHOLD}
    config.update(proposal_sigma=PROPOSAL_SIGMA, gt_sigma=GT_SIGMA, input_keys=list(inputs))
    out["config"] = np.asarray(json.dumps(config, sort_keys=True))
    return out
