"""The ensemble network equals R separate single networks, forward and gradients."""

import torch

from ltr.models.toy1d import LAYERS, Toy1DEnsemble, Toy1DNet


def _inputs(r, n, s, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(r, n, 1, generator=g) * 6 - 3, torch.randn(r, n, s, 1, generator=g)


def test_ensemble_equals_separate_models_forward_and_gradients():
    models = [Toy1DNet(generator=torch.Generator().manual_seed(k)) for k in range(3)]
    ens = Toy1DEnsemble.from_models(models)
    x, y = _inputs(3, 5, 7)
    out = ens(x, y)
    assert out.shape == (3, 5, 7)
    weights = torch.randn(3, 5, 7)
    (out * weights).sum().backward()
    for r, model in enumerate(models):
        single = model(x[r], y[r])
        torch.testing.assert_close(out[r], single, rtol=1e-5, atol=1e-6)
        (single * weights[r]).sum().backward()
        for name, _, _ in LAYERS:
            layer = getattr(model, name)
            torch.testing.assert_close(
                getattr(ens, f"{name}_w").grad[r], layer.weight.grad.t(), rtol=1e-4, atol=1e-5
            )
            torch.testing.assert_close(
                getattr(ens, f"{name}_b").grad[r, 0], layer.bias.grad, rtol=1e-4, atol=1e-5
            )
    # round trip
    back = ens.member(1)
    torch.testing.assert_close(back(x[1], y[1]), models[1](x[1], y[1]))


def test_seeded_ensemble_members_equal_seeded_single_models():
    gens = [torch.Generator().manual_seed(10 + k) for k in range(2)]
    ens = Toy1DEnsemble(2, generators=gens)
    single = Toy1DNet(generator=torch.Generator().manual_seed(11))
    x, y = _inputs(1, 4, 3)
    torch.testing.assert_close(ens.member(1)(x[0], y[0]), single(x[0], y[0]))


def test_init_follows_pytorch_default_bounds():
    ens = Toy1DEnsemble(50, generators=[torch.Generator().manual_seed(k) for k in range(50)])
    for name, fan_in, _ in LAYERS:
        bound = fan_in**-0.5
        for p in (getattr(ens, f"{name}_w"), getattr(ens, f"{name}_b")):
            assert p.abs().max() <= bound
            assert p.abs().max() > 0.9 * bound  # uniform over the whole interval
            assert abs(p.mean().item()) < 0.1 * bound
