"""The DiMP actor: runs DiMPNet on a training batch and returns the loss and named statistics."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ltr.ebm import KLDIS, SM, Candidates
from ltr.models.losses import (
    ClassifierLossWeights,
    classifier_loss,
    is_sampling_method,
    sampling_box_loss,
    score_function_box_loss,
)
from ltr.models.tracking import DiMPNet

REQUIRED_KEYS = ("train_images", "test_images", "train_boxes", "test_boxes", "test_label")
PROPOSAL_KEYS = ("proposals", "proposals_rel", "proposal_log_q")


class DiMPActor:
    """Classifier hinge-MSE over the filter iterates + ``box_weight`` x EBM box loss.

    Batch (the data pipeline's contract; boxes xywh crop pixels): ``train_images`` (S_tr, B, 3, H, W),
    ``test_images`` (S_te, B, 3, H, W), ``train_boxes`` (S_tr, B, 4), ``test_boxes`` (S_te, B, 4),
    ``test_label`` (S_te, B, H', W') with (H', W') = ``net.score_map_size((H, W))`` (DiMP's end-padded
    labels) or one less per side (the loss then covers the score map less its last row and column); for the
    sampling box methods also ``proposals`` (S_te, B, S, 4) xywh, ``proposals_rel`` (S_te, B, S, 4) (rel
    space w.r.t. ``test_boxes``), ``proposal_log_q`` (S_te, B, S) and, for ``kld_is``, ``proposal_log_p``.
    Other keys are ignored.

    ``__call__(batch) -> (loss, stats)``: loss a scalar tensor; stats detached scalar tensors named
    ``loss/total``, ``loss/box`` (unweighted box loss), ``loss/clf`` (weighted classifier loss),
    ``clf/final`` (unweighted hinge-MSE of the final filter), ``clf/iter_<i>`` (unweighted, i = 0 the
    initial filter) and the box method's own stats as ``box/<name>``, among them ``box/score_gap`` (mean
    box-head score of the positive minus that of the noise samples, for ``ml_is``, ``nce``, ``nce_plus``).
    With ``score_ground_truth`` the ground-truth box is scored too: ``box/score_gt`` and ``box/score_gap``
    (ground truth minus the samples, every method but ``sm``).

    Args:
        net: the network.
        box_method: an :func:`ltr.ebm.build_method` object, or None for no box loss (the box head then gets
            no gradient: under DistributedDataParallel that needs ``find_unused_parameters=True``).
        box_weight: weight of the box loss (0.01 as in SuperDiMP).
        clf_weights: classifier loss weights over the iterates.
        hinge_threshold: the hinge-MSE label threshold.
        score_ground_truth: for the sampling methods, score the ground-truth box with the proposals (one
            more box per test frame) for the ``box/score_gt`` / ``box/score_gap`` statistics. Off by default,
            as in the reference: in train mode the box head's BatchNorm takes its statistics over every
            scored box, so the extra box would change the loss (by about one part in the number of boxes).
    """

    def __init__(
        self,
        net: DiMPNet,
        box_method: Any | None,
        box_weight: float = 0.01,
        clf_weights: ClassifierLossWeights = ClassifierLossWeights(),  # noqa: B008 (frozen dataclass)
        *,
        hinge_threshold: float = 0.05,
        score_ground_truth: bool = False,
    ) -> None:
        if isinstance(box_method, SM):
            raise ValueError(
                "DiMPActor: box method 'sm' needs third-order derivatives through the box head's BatchNorm, "
                "which PyTorch does not provide; use 'dsm' (denoising score matching) instead"
            )
        self.net = net
        self.box_method = box_method
        self.box_weight = box_weight
        self.clf_weights = clf_weights
        self.hinge_threshold = hinge_threshold
        self.score_ground_truth = score_ground_truth

    def train(self, mode: bool = True) -> DiMPActor:
        """Put the network in train (or eval) mode."""
        self.net.train(mode)
        return self

    def to(self, device: torch.device | str) -> DiMPActor:
        """Move the network to ``device``."""
        self.net.to(device)
        return self

    @property
    def module(self) -> DiMPNet:
        """The plain network (``net`` may be a DistributedDataParallel wrapper set by the trainer)."""
        return getattr(self.net, "module", self.net)

    def _check(self, batch: Mapping[str, Tensor]) -> None:
        keys = list(REQUIRED_KEYS)
        if self.box_method is not None and is_sampling_method(self.box_method):
            keys += PROPOSAL_KEYS
        if isinstance(self.box_method, KLDIS):
            keys.append("proposal_log_p")
        missing = [k for k in keys if k not in batch]
        if missing:
            raise KeyError(f"DiMPActor: batch lacks {missing} (has {sorted(batch)})")
        h, w = batch["test_images"].shape[-2:]
        full = self.module.score_map_size((h, w))
        cut = (full[0] - 1, full[1] - 1)
        if tuple(batch["test_label"].shape[-2:]) not in (full, cut):
            raise ValueError(
                f"DiMPActor: test_label is {tuple(batch['test_label'].shape)} but the score maps for "
                f"{h}x{w} crops are {full} (labels of {full} or, without the end padding, {cut} are accepted)"
            )

    def __call__(self, batch: Mapping[str, Tensor]) -> tuple[Tensor, dict[str, Tensor]]:
        self._check(batch)
        device = next(self.module.parameters()).device
        batch = {k: v.to(device, non_blocking=True) if isinstance(v, Tensor) else v for k, v in batch.items()}
        images = (batch["train_images"], batch["test_images"], batch["train_boxes"])
        test_boxes = batch["test_boxes"]
        s_te, b = test_boxes.shape[:2]
        method = self.box_method
        sampling = method is not None and is_sampling_method(method)
        # one call through the (possibly DDP-wrapped) network's forward; sampling methods score the
        # proposals (plus, with score_ground_truth, the ground truth: last column, statistics only) there
        with_gt = sampling and self.score_ground_truth
        if sampling:
            proposals = batch["proposals"]
            if with_gt:
                proposals = torch.cat([proposals, test_boxes[:, :, None]], dim=2)
            out = self.net(*images, proposals, return_context=True)
        else:
            out = self.net(*images, None, return_context=True)

        label = batch["test_label"]
        # labels without the end padding cover the score map less its last row and column
        clf_scores = out.clf_scores[..., : label.shape[-2], : label.shape[-1]]
        clf = classifier_loss(clf_scores, label, self.clf_weights, threshold=self.hinge_threshold)
        stats: dict[str, Tensor] = {}
        total = clf.total
        if method is not None:
            n = s_te * b
            if sampling:
                scores = out.box_scores.reshape(n, -1)
                log_p = batch.get("proposal_log_p")
                candidates = Candidates(
                    batch["proposals_rel"].reshape(n, -1, 4),
                    batch["proposal_log_q"].reshape(n, -1),
                    None if log_p is None else log_p.reshape(n, -1),
                )
                if with_gt:
                    box = sampling_box_loss(method, scores[:, :-1], candidates, score_gt=scores[:, -1])
                else:
                    box = sampling_box_loss(method, scores, candidates)
            else:
                context = out.box_context

                def score_boxes(boxes: Tensor) -> Tensor:  # (S_te*B, S, 4) xywh -> (S_te*B, S)
                    grid = boxes.reshape(s_te, b, *boxes.shape[1:])
                    return self.module.score_boxes(context, grid).reshape(n, -1)

                box = score_function_box_loss(method, score_boxes, test_boxes.reshape(n, 4))
            total = total + self.box_weight * box.loss
            stats["loss/box"] = box.loss.detach()
            stats.update({f"box/{k}": v for k, v in box.stats.items()})
        stats["loss/total"] = total.detach()
        stats["loss/clf"] = clf.total.detach()
        stats["clf/final"] = clf.per_iterate[-1]
        stats.update({f"clf/iter_{i}": v for i, v in enumerate(clf.per_iterate)})
        return total, stats
