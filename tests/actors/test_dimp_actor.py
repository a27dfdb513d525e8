"""DiMPActor on batches made by the real data pipeline (DiMPProcessing) from generated frames."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ltr.actors import DiMPActor
from ltr.data.config import DataConfig
from ltr.data.loader import collate_frames
from ltr.data.processing import DiMPProcessing, FrameSet
from ltr.ebm import build_method
from ltr.models.tracking import build_dimpnet, tiny_net_config

NCE_PLUS = {"sigmas": ((0.05,) * 4, (0.5,) * 4), "num_samples": 15, "beta": 0.1}
KLD_IS = {"sigmas": ((0.05,) * 4, (0.5,) * 4), "num_samples": 16, "label_sigma": 0.05}


def _frame(rng: np.random.Generator, size: int = 192) -> tuple[np.ndarray, np.ndarray]:
    """A smooth random background with a striped red target; returns (image (H, W, 3) uint8, xywh box)."""
    small = rng.integers(40, 200, size=(size // 16 + 1, size // 16 + 1, 3))
    image = np.repeat(np.repeat(small, 16, axis=0), 16, axis=1)[:size, :size].astype(np.uint8)
    w, h = rng.uniform(24, 48, size=2)
    x, y = rng.uniform(20, size - 20 - w), rng.uniform(20, size - 20 - h)
    c0, c1, r0, r1 = int(x), int(x + w), int(y), int(y + h)
    image[r0:r1, c0:c1] = (240, 30, 30)
    image[r0:r1:4, c0:c1] = (30, 30, 240)
    return image, np.array([c0, r0, c1 - c0, r1 - r0], dtype=np.float64)


def make_batch(
    method: str, kwargs: dict, *, batch_size: int = 2, seed: int = 0, label_end_pad: bool = True
) -> dict[str, torch.Tensor]:
    config = DataConfig(
        crop_size=128,
        box_method=method,
        box_method_kwargs=kwargs,
        label_end_pad=label_end_pad,
        center_jitter_test=1.0,
        scale_jitter_test=0.1,
    )
    processing = DiMPProcessing(config, augment=False)
    rng = np.random.default_rng(seed)
    samples = []
    for i in range(batch_size):
        frames = [_frame(rng) for _ in range(6)]
        fs = FrameSet(
            train_images=[f[0] for f in frames[:3]],
            train_boxes=np.stack([f[1] for f in frames[:3]]),
            test_images=[f[0] for f in frames[3:]],
            test_boxes=np.stack([f[1] for f in frames[3:]]),
        )
        samples.append(processing(fs, rng, torch.Generator().manual_seed(seed * 100 + i)))
    return collate_frames(samples)


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return build_dimpnet(tiny_net_config())


NAMED = ("loss/total", "loss/box", "loss/clf", "clf/final", "box/score_gap", "box/score_gt")


@pytest.mark.parametrize(
    ("method", "kwargs"),
    [("nce_plus", NCE_PLUS), ("kld_is", KLD_IS), ("dsm", {"num_samples": 8, "sigma": 0.05})],
)
def test_actor_returns_finite_loss_and_named_stats(net, method, kwargs):
    batch = make_batch(method, kwargs)
    actor = DiMPActor(net, build_method(method, **kwargs), score_ground_truth=True).train()
    net.zero_grad()
    loss, stats = actor(batch)
    assert loss.dim() == 0 and torch.isfinite(loss)
    for key in (*NAMED, *(f"clf/iter_{i}" for i in range(6))):
        assert key in stats and torch.isfinite(stats[key]) and not stats[key].requires_grad, key
    clf = stats["loss/clf"]
    assert loss.item() == pytest.approx((clf + 0.01 * stats["loss/box"]).item(), rel=1e-5)
    assert stats["clf/final"] == stats["clf/iter_5"]
    loss.backward()
    assert net.box_head.predictor.weight.grad.abs().sum() > 0
    assert net.classifier.optimizer.log_step_length.grad is not None


def test_ground_truth_is_scored_only_when_asked(net):
    # the reference scores the proposals alone; in train mode the box head's BatchNorm statistics would
    # include the ground-truth box, so scoring it changes the loss
    batch = make_batch("kld_is", KLD_IS)
    method = build_method("kld_is", **KLD_IS)
    net.train()
    torch.manual_seed(0)
    plain_loss, plain = DiMPActor(net, method)(batch)
    with_gt_loss, with_gt = DiMPActor(net, method, score_ground_truth=True)(batch)
    assert "box/score_gt" not in plain and "box/score_gap" not in plain
    assert "box/score_gt" in with_gt and torch.isfinite(with_gt["box/score_gap"])
    assert with_gt["loss/box"].item() != plain["loss/box"].item()
    assert with_gt_loss.item() == pytest.approx(plain_loss.item(), rel=1e-2)
    net.eval()
    with torch.no_grad():  # eval mode: each box is scored on its own, so the loss is the same
        _, a = DiMPActor(net, method)(batch)
        _, b = DiMPActor(net, method, score_ground_truth=True)(batch)
    assert a["loss/box"].item() == pytest.approx(b["loss/box"].item(), rel=1e-6)


def test_labels_without_end_padding_are_accepted(net):
    padded = make_batch("nce_plus", NCE_PLUS, label_end_pad=True)
    cut = make_batch("nce_plus", NCE_PLUS, label_end_pad=False)
    assert padded["test_label"].shape[-1] == 9 and cut["test_label"].shape[-1] == 8
    torch.testing.assert_close(cut["test_label"], padded["test_label"][..., :8, :8])
    actor = DiMPActor(net, None)
    net.eval()
    with torch.no_grad():
        _, a = actor(padded)
        _, b = actor(cut)
    assert "loss/box" not in a
    assert 0 < b["clf/final"] < a["clf/final"] * 1.5


def test_bad_batches_and_methods_are_named(net):
    batch = make_batch("nce_plus", NCE_PLUS)
    actor = DiMPActor(net, build_method("nce_plus", **NCE_PLUS))
    with pytest.raises(KeyError, match="proposal_log_q"):
        actor({k: v for k, v in batch.items() if k != "proposal_log_q"})
    with pytest.raises(ValueError, match="score maps"):
        actor({**batch, "test_label": batch["test_label"][..., :5, :5]})
    with pytest.raises(ValueError, match="dsm"):
        DiMPActor(net, build_method("sm"))


def test_short_training_reduces_both_losses():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config())
    batch = make_batch("nce_plus", NCE_PLUS, batch_size=2, seed=1)
    actor = DiMPActor(net, build_method("nce_plus", **NCE_PLUS)).train()
    optim = torch.optim.Adam(net.parameters(), lr=2e-3)
    history = []
    for _ in range(20):
        loss, stats = actor(batch)
        optim.zero_grad()
        loss.backward()
        optim.step()
        history.append({k: v.item() for k, v in stats.items()})
    first, last = history[0], history[-1]
    # Adam's steps make the tiny classifier loss spike now and then (x2-5 for a step): average the last five
    late_clf = sum(h["clf/final"] for h in history[-5:]) / 5
    assert late_clf < 0.5 * first["clf/final"], [h["clf/final"] for h in history]
    assert last["loss/box"] < 0.7 * first["loss/box"], (first, last)
    assert last["box/score_gap"] > first["box/score_gap"] + 1.0, (first, last)


@pytest.mark.parametrize(
    ("method", "kwargs"), [("nce_plus", NCE_PLUS), ("dsm", {"num_samples": 4, "sigma": 0.05})]
)
def test_actor_through_a_distributed_wrapper_matches_the_plain_network(tmp_path, method, kwargs):
    import torch.distributed as dist

    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config()).eval()  # eval: BatchNorm gives the same numbers in both runs
    batch = make_batch(method, kwargs)
    actor = DiMPActor(net, build_method(method, **kwargs))
    torch.manual_seed(1)
    plain, _ = actor(batch)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        actor.net = torch.nn.parallel.DistributedDataParallel(net)
        torch.manual_seed(1)
        wrapped, stats = actor(batch)
        wrapped.backward()
    finally:
        dist.destroy_process_group()
    assert wrapped.item() == pytest.approx(plain.item(), rel=1e-5)
    assert net.box_head.predictor.weight.grad is not None
    assert torch.isfinite(stats["box/score_gap"])


@pytest.mark.slow
def test_training_on_fresh_batches_generalises_to_held_out_batches():
    torch.manual_seed(0)
    net = build_dimpnet(tiny_net_config())
    actor = DiMPActor(net, build_method("nce_plus", **NCE_PLUS))
    optim = torch.optim.Adam(net.parameters(), lr=1e-3)
    held_out = [make_batch("nce_plus", NCE_PLUS, batch_size=4, seed=10_000 + i) for i in range(2)]

    def evaluate() -> dict[str, float]:
        actor.train(False)
        with torch.no_grad():
            stats = [actor(b)[1] for b in held_out]
        actor.train(True)
        return {k: sum(s[k].item() for s in stats) / len(stats) for k in ("clf/final", "loss/box")}

    before = evaluate()
    for i in range(60):
        loss, _ = actor(make_batch("nce_plus", NCE_PLUS, batch_size=4, seed=i))
        optim.zero_grad()
        loss.backward()
        optim.step()
    after = evaluate()
    assert after["clf/final"] < 0.3 * before["clf/final"], (before, after)
    assert after["loss/box"] < 0.6 * before["loss/box"], (before, after)


def test_kld_is_needs_the_label_density(net):
    batch = make_batch("kld_is", KLD_IS)
    actor = DiMPActor(net, build_method("kld_is", **KLD_IS))
    with pytest.raises(KeyError, match="proposal_log_p"):
        actor({k: v for k, v in batch.items() if k != "proposal_log_p"})


def test_training_gradients_match_the_grouped_convolution_scores(monkeypatch):
    """apply_filter's product form is the grouped convolution's arithmetic through the whole training graph
    (initializer, unrolled optimiser, test scores, box loss): float64 gradients of every parameter agree."""
    import torch.nn.functional as F

    from ltr.models.target_classifier import linear_filter, optimizer

    def grouped_conv(features, filters):  # the formula apply_filter replaced
        s, b, c, h, w = features.shape
        return F.conv2d(features.reshape(s, b * c, h, w), filters, padding=filters.shape[-1] // 2, groups=b)

    def gradients():
        torch.manual_seed(0)
        net = build_dimpnet(tiny_net_config()).double()
        batch = {
            k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v
            for k, v in make_batch("nce_plus", NCE_PLUS, batch_size=2, seed=1).items()
        }
        actor = DiMPActor(net, build_method("nce_plus", **NCE_PLUS)).train()
        torch.manual_seed(5)
        loss, _ = actor(batch)
        loss.backward()
        return loss.item(), {n: p.grad for n, p in net.named_parameters() if p.grad is not None}

    loss, grads = gradients()
    monkeypatch.setattr(optimizer, "apply_filter", grouped_conv)
    monkeypatch.setattr(linear_filter, "apply_filter", grouped_conv)
    ref_loss, ref_grads = gradients()
    assert loss == pytest.approx(ref_loss, rel=1e-12)
    assert grads.keys() == ref_grads.keys() and len(grads) > 50
    for name, g in grads.items():
        torch.testing.assert_close(
            g, ref_grads[name], rtol=1e-9, atol=1e-12 * ref_grads[name].abs().max().item()
        )
