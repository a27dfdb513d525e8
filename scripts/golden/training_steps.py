"""Three SuperDiMP training steps of pytracking from seeded weights on a recorded batch.

pytracking's ``dimpnet50`` with SuperDiMP's constructor arguments (conv1 / bn1 / layer1 / layer2 frozen), every
parameter and buffer set by :func:`tests.golden.seeded.seeded_state_dict`, trains for ``NUM_STEPS`` steps as
pytracking's trainer does (``actor.train(True)``; per step ``loss, stats = actor(batch)``, ``zero_grad``,
``backward``, ``step``) with SuperDiMP's ``KLDiMPActor`` (``LBHinge(0.05)`` weighted 100 / 400 / 100 over the
filter iterates, ``KLRegression`` weighted 0.01) and Adam over its five parameter groups (filter initializer
5e-5, filter optimizer 5e-4, classifier features 5e-5, box regressor 1e-3, backbone layer3 2e-5). The batch is
samples ``BATCH_SAMPLES`` of the ``training_processing`` golden run (pytracking's own processing, the same
draws), stacked as its loader stacks them (batch 2: the box regressor's BatchNorm needs two sequences).

Recorded: the state dict's names and shapes (``meta``, JSON), the batch (``batch__<key>``: every tensor but
the images, (S, 2, ...) as pytracking's loader stacks them, and each image's sum, ``batch__<key>_sums``
(S, 2) float64), every step's loss and stats (``losses``, ``stats__<name>`` with ``/`` as ``.``), and for every
state entry (in ``meta["state_keys"]`` order) the change over the steps (after - before): its sum, sum of
absolute values and sum of squares (``delta_stats`` (K, 3) float64) and, where it changed, every
``STRIDE``-th element (entry k's are ``delta_sub[delta_sub_offsets[k]:delta_sub_offsets[k + 1]]``).
``tests/trainers/test_training_steps_golden.py`` trains this toolkit's converted network on the same batch
(its own images of the same frames and draws, equal to pytracking's bit for bit, with the recorded boxes,
labels, proposals and densities) and compares.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import torch

from scripts.golden import training_processing
from scripts.golden.reference import import_reference
from tests.golden.pytracking_format import SUPER_DIMP_KWDS
from tests.golden.seeded import seeded_state_dict

OUT = "training_steps.npz"
SEED = 0
NUM_STEPS = 3
BATCH_SAMPLES = (0, 3)
STRIDE = 4099
LOSS_WEIGHT = {"bb_ce": 0.01, "test_clf": 100, "test_init_clf": 100, "test_iter_clf": 400}
#: SuperDiMP's Adam groups: (module path in pytracking's DiMPnet, learning rate)
LR_GROUPS = (
    ("classifier.filter_initializer", 5e-5),
    ("classifier.filter_optimizer", 5e-4),
    ("classifier.feature_extractor", 5e-5),
    ("bb_regressor", 1e-3),
    ("feature_extractor.layer3", 2e-5),
)
BATCH_KEYS = (
    "train_images",
    "test_images",
    "train_anno",
    "test_anno",
    "test_proposals",
    "proposal_density",
    "gt_density",
    "test_label",
)


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The golden file's arrays (see the module docstring)."""
    ref = import_reference(
        args.pytracking,
        **training_processing.REFERENCE_MODULES,
        dimpnet="ltr.models.tracking.dimpnet",
        actors="ltr.actors.tracking",
        target_classification="ltr.models.loss.target_classification",
        kl_regression="ltr.models.loss.kl_regression",
    )
    samples = training_processing.process_samples(ref)
    chosen = [samples[i][2] for i in BATCH_SAMPLES]
    batch = ref.tensordict.TensorDict({k: torch.stack([s[k] for s in chosen], dim=1) for k in BATCH_KEYS})

    torch.manual_seed(SEED)
    net = ref.dimpnet.dimpnet50(**{**SUPER_DIMP_KWDS, "backbone_pretrained": False})
    keys_and_shapes = [(k, list(v.shape)) for k, v in net.state_dict().items()]
    net.load_state_dict(seeded_state_dict(SEED, keys_and_shapes))
    before = {k: v.clone() for k, v in net.state_dict().items()}

    objective = {
        "bb_ce": ref.kl_regression.KLRegression(),
        "test_clf": ref.target_classification.LBHinge(threshold=0.05),
    }
    actor = ref.actors.KLDiMPActor(net=net, objective=objective, loss_weight=LOSS_WEIGHT)
    groups = [{"params": net.get_submodule(path).parameters(), "lr": lr} for path, lr in LR_GROUPS]
    optimizer = torch.optim.Adam(groups, lr=2e-4)
    actor.train(True)
    out: dict[str, Any] = {f"batch__{k}": batch[k].numpy() for k in BATCH_KEYS if not k.endswith("images")}
    for key in ("train_images", "test_images"):
        out[f"batch__{key}_sums"] = batch[key].double().sum(dim=(2, 3, 4)).numpy()
    losses, stats_log = [], []
    for _ in range(NUM_STEPS):
        loss, stats = actor(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        stats_log.append(stats)
    out["losses"] = np.asarray(losses, np.float64)
    for name in stats_log[0]:
        out["stats__" + name.replace("/", ".")] = np.asarray([s[name] for s in stats_log], np.float64)
    after = net.state_dict()
    trainable = sorted(n for n, p in net.named_parameters() if p.requires_grad)
    stats_rows, subs = [], []
    for key, value in before.items():
        delta = (after[key] - value).double()
        stats_rows.append([delta.sum().item(), delta.abs().sum().item(), (delta**2).sum().item()])
        subs.append(delta.reshape(-1)[::STRIDE].float().numpy() if delta.any() else np.zeros(0, np.float32))
    out["delta_stats"] = np.asarray(stats_rows)
    out["delta_sub"] = np.concatenate(subs)
    out["delta_sub_offsets"] = np.cumsum([0] + [len(v) for v in subs])
    meta = {
        "seed": SEED,
        "num_steps": NUM_STEPS,
        "batch_samples": list(BATCH_SAMPLES),
        "stride": STRIDE,
        "state_keys": keys_and_shapes,
        "trainable": trainable,
        "lr_groups": [list(g) for g in LR_GROUPS],
        "loss_weight": LOSS_WEIGHT,
        "constructor_kwds": {**SUPER_DIMP_KWDS, "backbone_pretrained": False},
    }
    out["meta"] = np.asarray(json.dumps(meta, sort_keys=True))
    return out
