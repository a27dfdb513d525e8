"""MixStyle: per-image channel statistics mixed between the images of a training batch, identity otherwise."""

from __future__ import annotations

import pytest
import torch

from ltr.models.backbone import ResNetBackbone
from ltr.models.mixstyle import MixStyle


def _stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.mean(dim=(2, 3)), x.std(dim=(2, 3), unbiased=True)


def test_each_image_gets_one_mixture_of_its_own_and_one_other_images_statistics():
    torch.manual_seed(3)
    n, c = 6, 5
    mu = torch.randn(n, c, 1, 1) * 3
    sigma = torch.rand(n, c, 1, 1) * 4 + 0.5
    x = torch.randn(n, c, 9, 7) * sigma + mu
    y = MixStyle(p=1.0, alpha=0.1).train()(x)
    mx, sx = _stats(x)
    my, sy = _stats(y)
    mixed_with_another = 0
    for i in range(n):
        # one weight and one partner per image, shared by the means and deviations of all channels
        fits = []
        for j in range(n):
            lam = (my[i] - mx[j]) / (mx[i] - mx[j]) if j != i else None
            if lam is None:
                if torch.allclose(y[i], x[i], atol=1e-4):
                    fits.append(j)
                continue
            lam0 = lam[0]
            if not (-1e-4 <= lam0 <= 1 + 1e-4):
                continue
            if torch.allclose(my[i], lam0 * mx[i] + (1 - lam0) * mx[j], atol=1e-4) and torch.allclose(
                sy[i], lam0 * sx[i] + (1 - lam0) * sx[j], atol=1e-3
            ):
                fits.append(j)
        assert fits, f"image {i}: statistics are no mixture of its own and one other image's"
        mixed_with_another += any(j != i for j in fits)
        # the content (the normalised map) is the image's own
        zx = (x[i] - mx[i, :, None, None]) / sx[i, :, None, None]
        zy = (y[i] - my[i, :, None, None]) / sy[i, :, None, None]
        torch.testing.assert_close(zy, zx, atol=1e-4, rtol=1e-4)
    assert mixed_with_another >= 2


def test_identity_in_eval_mode_for_p_zero_and_single_images():
    x = torch.randn(4, 3, 5, 5)
    assert torch.equal(MixStyle(p=1.0).eval()(x), x)
    assert torch.equal(MixStyle(p=0.0).train()(x), x)
    assert torch.equal(MixStyle(p=1.0).train()(x[:1]), x[:1])


def test_p_is_the_share_of_batches_mixed():
    torch.manual_seed(0)
    m = MixStyle(p=0.3).train()
    x = torch.randn(4, 2, 3, 3)
    mixed = sum(not torch.equal(m(x), x) for _ in range(400))
    assert 90 <= mixed <= 150


def test_gradients_flow_through_the_normalised_content():
    torch.manual_seed(1)
    x = torch.randn(4, 3, 6, 6, requires_grad=True)
    MixStyle(p=1.0).train()(x).square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_bad_values_are_named():
    with pytest.raises(ValueError, match="p must be in"):
        MixStyle(p=1.5)
    with pytest.raises(ValueError, match="alpha must be positive"):
        MixStyle(alpha=0.0)


def test_backbone_mixes_in_training_only():
    torch.manual_seed(2)
    plain = ResNetBackbone(arch="resnet18", pretrained=False, base_width=8, norm="ibn")
    mixed = ResNetBackbone(arch="resnet18", pretrained=False, base_width=8, norm="ibn", mixstyle=1.0)
    mixed.load_state_dict(plain.state_dict())  # MixStyle has no parameters or buffers
    x = torch.randn(4, 3, 64, 64)
    plain.eval()
    mixed.eval()
    for name in ("layer2", "layer3"):
        assert torch.equal(plain(x)[name], mixed(x)[name])
    plain.train()
    mixed.train()
    assert not torch.allclose(plain(x)["layer3"], mixed(x)["layer3"], atol=1e-3)
