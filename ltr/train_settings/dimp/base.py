"""The base config of every DiMP train setting: the paper's DiMP-NCE+ training (SuperDiMP + NCE+ box loss).

Values (pytracking's ``ltr/train_settings/dimp/super_dimp.py`` and the paper's supplementary section on
DiMP-KLD-IS): ResNet-50 ImageNet backbone with conv1/layer1/layer2 frozen, 22 x 22 features for 352-pixel
crops (search area factor 6), batch 20, 40 000 samples per epoch, LaSOT train / GOT-10k vottrain /
TrackingNet chunks 0-3 / COCO 2014 train with weights 1, horizontal flip 0.5, 3 train + 3 test frames;
Adam with LR groups filter initializer 5e-5, filter optimizer 5e-4, classifier feature head 5e-5,
box head 1e-3, backbone layer3 2e-5; StepLR step 15, gamma 0.2; 50 epochs; box loss weight 0.01;
M = 128 box candidates from the 2-component Gaussian mixture (std 0.05 and 0.5 in rel space);
validation on GOT-10k votval, 10 000 samples every 5 epochs.

Variants (one small module each) change only what differs: ``kld_is``, ``nce``, ``ml_is`` the box loss,
``nce_plus_tiny`` the size (CPU network, small crops, the embedded synthetic videos).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ltr.data.config import DataConfig
from ltr.models.tracking import NetConfig, lr_groups
from ltr.trainers import TrainerConfig

#: The proposal/noise density of the box losses: equal-weight mixture, std (0.05, 0.5) on all 4 rel coords.
PROPOSAL_SIGMAS = ((0.05, 0.05, 0.05, 0.05), (0.5, 0.5, 0.5, 0.5))
#: Box candidates per test frame (the paper's M).
NUM_CANDIDATES = 128
#: Dataset options of the reference setting: TrackingNet chunks 0-3 and COCO **2014** train (pytracking's
#: ``MSCOCOSeq`` defaults to version 2014 and SuperDiMP does not change it; ``{"coco": {"version": "2017"}}``
#: trains on the larger 2017 train set instead, which also holds most of the 2014 val images).
REFERENCE_DATASET_OPTIONS: dict[str, Any] = {
    "trackingnet": {"chunks": [0, 1, 2, 3]},
    "coco": {"version": "2014"},
}
#: The trainable parts of DiMPNet, named by module prefix (its LR groups); ``train_parts`` picks among them.
PARTS = tuple(prefix for prefix, _ in lr_groups())


@dataclass
class LRConfig:
    """Adam learning rate of each trainable part of DiMPNet (``ltr.models.tracking.lr_groups``)."""

    initializer: float = 5e-5
    optimizer: float = 5e-4
    feature_head: float = 5e-5
    box_head: float = 1e-3
    backbone: float = 2e-5


@dataclass
class DiMPTrainConfig:
    """A DiMP training run: network, data pipeline, trainer, LR groups and box-loss weight.

    The box loss is ``data.box_method`` with ``data.box_method_kwargs``: the data pipeline draws the
    candidates with it and the actor computes the loss with the same method object.
    ``dataset_options`` holds extra keyword options for the dataset factories, per dataset name (TrackingNet
    ``chunks``, COCO ``version``) or per ``name:split`` spec (that split only); the defaults are
    :data:`REFERENCE_DATASET_OPTIONS`.

    ``init_from`` (a checkpoint of this toolkit, e.g. one converted from pytracking by
    ``ltr.admin.import_pytracking``) gives the initial weights of every part: its ``net`` config must equal
    ``net`` except in the keys that say how a network is initialised or trained, not what it computes
    (``ltr.train_settings.dimp.initial.NOT_COMPARED``), and no ImageNet weights are read. ``train_parts`` names the parts that train
    (entries of :data:`PARTS`, or ``classifier`` for its three); the others are frozen: no gradient, and
    BatchNorm in eval mode. Both are read by the training run only: :func:`ltr.models.tracking.build_dimpnet`
    sees ``net`` alone, so a trained network is rebuilt from its saved config without the initial file, and
    ``--resume`` continues from the run's own checkpoints.
    """

    net: NetConfig = field(default_factory=NetConfig)
    data: DataConfig = field(default_factory=DataConfig)
    trainer: TrainerConfig = field(default_factory=lambda: TrainerConfig(epochs=50, lr_step=15, lr_gamma=0.2))
    lr: LRConfig = field(default_factory=LRConfig)
    box_weight: float = 0.01
    dataset_options: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(REFERENCE_DATASET_OPTIONS))
    init_from: str | None = None
    train_parts: tuple[str, ...] = PARTS


def box_method_kwargs(method: str) -> dict[str, Any]:
    """Hyperparameters of box loss ``method`` with M = 128 candidates per test frame.

    ``nce`` / ``nce_plus``: 127 noise samples + the (noisy) positive; ``ml_is`` / ``kld_is``: 128 proposals
    (KLD-IS label density std 0.05 in rel space; NCE+ beta 0.1, scaling the component std, as the reference
    code does).
    """
    if method == "nce_plus":
        return {"sigmas": PROPOSAL_SIGMAS, "num_samples": NUM_CANDIDATES - 1, "beta": 0.1}
    if method == "nce":
        return {"sigmas": PROPOSAL_SIGMAS, "num_samples": NUM_CANDIDATES - 1}
    if method == "kld_is":
        return {"sigmas": PROPOSAL_SIGMAS, "num_samples": NUM_CANDIDATES, "label_sigma": 0.05}
    if method == "ml_is":
        return {"sigmas": PROPOSAL_SIGMAS, "num_samples": NUM_CANDIDATES}
    raise ValueError(f"no DiMP box-loss preset for {method!r}; choose nce_plus, nce, kld_is or ml_is")


def base_config(box_method: str = "nce_plus") -> DiMPTrainConfig:
    """The paper's setting with box loss ``box_method``."""
    data = DataConfig(
        crop_size=22 * 16,
        search_area_factor=6.0,
        label_end_pad=True,  # labels cover the full (feature size + 1) score map of the even 4x4 filter
        datasets=("lasot:train", "got10k:vottrain", "trackingnet:train", "coco:train"),
        dataset_weights=(1.0, 1.0, 1.0, 1.0),
        val_datasets=("got10k:votval",),
        samples_per_epoch=40000,
        val_samples_per_epoch=10000,
        batch_size=20,
        flip_prob=0.5,
        box_method=box_method,
        box_method_kwargs=box_method_kwargs(box_method),
    )
    net = NetConfig(backbone="resnet50", pretrained=True, frozen_layers=("conv1", "layer1", "layer2"))
    trainer = TrainerConfig(epochs=50, lr_step=15, lr_gamma=0.2, val_every=5)
    return DiMPTrainConfig(net=net, data=data, trainer=trainer)


def with_box_method(config: DiMPTrainConfig, method: str) -> DiMPTrainConfig:
    """``config`` with its box loss (and candidate sampling) switched to ``method``."""
    data = dataclasses.replace(config.data, box_method=method, box_method_kwargs=box_method_kwargs(method))
    return dataclasses.replace(config, data=data)
