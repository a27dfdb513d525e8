"""SuperDiMP's training losses against pytracking's, on the same network outputs and labels.

``tests/golden/training_losses.npz`` comes from pytracking's ``KLDiMPActor`` with SuperDiMP's objective
(``LBHinge(threshold=0.05)`` per filter iterate weighted 100 / 400 / 100, ``KLRegression`` weighted 0.01) on the
outputs of :func:`tests.golden.loss_inputs.loss_inputs` (``python scripts/pytracking_golden.py training_losses
--pytracking PATH``). This toolkit's classifier loss, KLD-IS and :class:`DiMPActor` run on the same numbers; its
network is replaced by one that returns them (no network can be made to output the reference's numbers).
Everything is float32 on both sides with sums in another order, so values agree to ``RTOL`` = 1e-5 and
gradients to 1e-5 of their largest entry.

NCE+ has no pytracking implementation: its expected value is written here from the paper's definition (the
ranking-NCE loss with the noisy positive y_0 = y + nu, eq. 14, and the noise density p_N of eq. 13) in float64
on our candidates and the same box scores.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ltr.actors import DiMPActor
from ltr.ebm import Candidates, build_method
from ltr.ebm.densities import GaussianMixture
from ltr.models.losses import ClassifierLossWeights, classifier_loss
from ltr.train_settings.dimp.base import box_method_kwargs
from tests.golden.loss_inputs import loss_inputs

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "training_losses.npz"
RTOL = 1e-5


@pytest.fixture(scope="module")
def golden() -> dict[str, np.ndarray]:
    with np.load(GOLDEN, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def inputs(golden) -> dict[str, torch.Tensor]:
    arrays = loss_inputs(0)
    sums = [float(v.astype(np.float64).sum()) for v in arrays.values()]
    np.testing.assert_allclose(sums, golden["input_sums"], rtol=1e-12)  # the generator still makes them
    return {k: torch.from_numpy(v) for k, v in arrays.items()}


def _stat(golden, name: str) -> float:
    return float(golden["stats__" + name.replace("/", ".")])


def test_classifier_loss_per_iterate_and_weighted(golden, inputs):
    weights = ClassifierLossWeights(final=100.0, initial=100.0, intermediate=400.0)  # SuperDiMP's
    assert weights == ClassifierLossWeights()
    clf = classifier_loss(inputs["target_scores"], inputs["test_label"], weights, threshold=0.05)
    np.testing.assert_allclose(clf.per_iterate.numpy(), golden["clf_losses"], rtol=RTOL)
    expected = sum(_stat(golden, k) for k in ("Loss/target_clf", "Loss/test_init_clf", "Loss/test_iter_clf"))
    assert clf.total.item() == pytest.approx(expected, rel=RTOL)


def _offsets(inputs) -> torch.Tensor:
    return inputs["proposal_offsets"].reshape(-1, 128, 4)


def test_kld_is_on_the_reference_densities_and_on_ours(golden, inputs):
    method = build_method("kld_is", **box_method_kwargs("kld_is"))
    scores = inputs["bb_scores"].reshape(-1, 128)
    log_q = torch.from_numpy(golden["proposal_density"]).log().reshape(-1, 128)
    log_p = torch.from_numpy(golden["gt_density"]).log().reshape(-1, 128)  # -inf where it underflowed
    theirs = method.loss_from_scores(scores, Candidates(_offsets(inputs), log_q, log_p)).loss
    assert theirs.item() == pytest.approx(float(golden["bb_ce"]), rel=RTOL)
    # our own densities of the same offsets (the method's proposal mixture and label density)
    q = GaussianMixture(method.sigmas).log_prob_offsets(_offsets(inputs))
    p = GaussianMixture([method.label_sigma]).log_prob_offsets(_offsets(inputs))
    ours = method.loss_from_scores(scores, Candidates(_offsets(inputs), q, p)).loss
    assert ours.item() == pytest.approx(float(golden["bb_ce"]), rel=RTOL)


class FixedOutputs(torch.nn.Module):
    """Stands in for DiMPNet in the actor: returns the given classifier and box scores (as parameters, so
    the gradients of the loss land in ``.grad``)."""

    def __init__(self, clf_scores: torch.Tensor, box_scores: torch.Tensor) -> None:
        super().__init__()
        self.clf = torch.nn.Parameter(clf_scores.clone())
        self.box = torch.nn.Parameter(box_scores.clone())

    def score_map_size(self, image_size: tuple[int, int]) -> tuple[int, int]:
        return tuple(self.clf.shape[-2:])

    def forward(self, train_images, test_images, train_boxes, proposals, return_context=False):
        assert proposals.shape[:3] == self.box.shape  # the proposals alone, as the reference scores them
        return SimpleNamespace(clf_scores=self.clf, box_scores=self.box, box_context=None)


def _batch(inputs, method: str, candidates: Candidates) -> dict[str, torch.Tensor]:
    num_test, batch = inputs["test_boxes"].shape[:2]
    out = {
        "train_images": torch.zeros(3, batch, 3, 352, 352),
        "test_images": torch.zeros(num_test, batch, 3, 352, 352),
        "train_boxes": inputs["test_boxes"],
        "test_boxes": inputs["test_boxes"],
        "test_label": inputs["test_label"],
        "proposals": inputs["proposals"],
        "proposals_rel": candidates.y.reshape(num_test, batch, -1, 4),
        "proposal_log_q": candidates.log_q.reshape(num_test, batch, -1),
    }
    if candidates.log_p is not None:
        out["proposal_log_p"] = candidates.log_p.reshape(num_test, batch, -1)
    return out


def test_actor_total_stats_and_gradients_match(golden, inputs):
    log_q = torch.from_numpy(golden["proposal_density"]).log()
    log_p = torch.from_numpy(golden["gt_density"]).log()
    candidates = Candidates(inputs["proposal_offsets"], log_q, log_p)
    net = FixedOutputs(inputs["target_scores"], inputs["bb_scores"])
    actor = DiMPActor(net, build_method("kld_is", **box_method_kwargs("kld_is")), box_weight=0.01)
    loss, stats = actor(_batch(inputs, "kld_is", candidates))
    assert loss.item() == pytest.approx(float(golden["total"]), rel=RTOL)
    assert loss.item() == pytest.approx(_stat(golden, "Loss/total"), rel=RTOL)
    assert stats["loss/box"].item() == pytest.approx(_stat(golden, "Loss/bb_ce"), rel=RTOL)
    clf_total = sum(_stat(golden, k) for k in ("Loss/target_clf", "Loss/test_init_clf", "Loss/test_iter_clf"))
    assert stats["loss/clf"].item() == pytest.approx(clf_total, rel=RTOL)
    assert stats["clf/final"].item() == pytest.approx(_stat(golden, "ClfTrain/test_loss"), rel=RTOL)
    iterates = [stats[f"clf/iter_{i}"].item() for i in range(6)]
    np.testing.assert_allclose(iterates, golden["clf_losses"], rtol=RTOL)
    loss.backward()
    grad_box, grad_clf = golden["grad_bb_scores"], golden["grad_target_scores"]
    np.testing.assert_allclose(net.box.grad.numpy(), grad_box, rtol=0, atol=RTOL * np.abs(grad_box).max())
    ours_clf = net.clf.grad[..., ::2, ::2].numpy()
    np.testing.assert_allclose(ours_clf, grad_clf, rtol=0, atol=RTOL * np.abs(grad_clf).max())


def _nce_plus_by_the_paper(scores: np.ndarray, y: np.ndarray, sigmas: np.ndarray) -> float:
    """Paper eq. 14 in float64: -1/n sum_i log(exp(f_i0 - log p_N(y_i0)) / sum_m exp(f_im - log p_N(y_im))),
    p_N(y | y_i) = 1/K sum_k N(y; y_i, sigma_k^2 I) (eq. 13) with y_i = 0 in rel space; column 0 is the noisy
    positive y_i + nu_i, the others the M noise samples."""
    dim = y.shape[-1]
    comps = []
    for sig in sigmas:
        z = y / sig
        comps.append(np.exp(-0.5 * (z**2).sum(-1)) / np.prod(sig) / (2 * math.pi) ** (dim / 2))
    log_pn = np.log(np.mean(comps, axis=0))
    logits = scores - log_pn
    ratio = np.exp(logits[:, 0]) / np.exp(logits).sum(-1)
    return float(-np.mean(np.log(ratio)))


def test_nce_plus_is_the_papers_loss_and_the_actor_adds_it(golden, inputs):
    kwargs = box_method_kwargs("nce_plus")
    method = build_method("nce_plus", **kwargs)
    n = 6
    candidates = method.sample(torch.zeros(n, 4), generator=torch.Generator().manual_seed(3))
    assert candidates.y.shape == (n, 128, 4)
    scores = inputs["bb_scores"].reshape(n, 128)
    expected = _nce_plus_by_the_paper(
        scores.double().numpy(), candidates.y.double().numpy(), np.asarray(kwargs["sigmas"], np.float64)
    )
    ours = method.loss_from_scores(scores, candidates).loss
    assert ours.item() == pytest.approx(expected, rel=RTOL)
    # the actor: the same classifier loss as the reference's plus 0.01 NCE+
    net = FixedOutputs(inputs["target_scores"], inputs["bb_scores"])
    loss, stats = DiMPActor(net, method, box_weight=0.01)(_batch(inputs, "nce_plus", candidates))
    clf_total = sum(_stat(golden, k) for k in ("Loss/target_clf", "Loss/test_init_clf", "Loss/test_iter_clf"))
    assert stats["loss/box"].item() == pytest.approx(expected, rel=RTOL)
    assert loss.item() == pytest.approx(clf_total + 0.01 * expected, rel=RTOL)
