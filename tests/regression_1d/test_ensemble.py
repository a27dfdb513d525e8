"""The ensemble trainer's loss is ltr.ebm's loss of each member on its own: for every method, the same samples
(the same random numbers, drawn in the same order), the same per-member loss and the same gradients as R
standalone ``Toy1DNet`` models scoring their own examples."""

import pytest
import torch

from ltr.models.toy1d import LAYERS, Toy1DEnsemble, Toy1DNet
from ltr.regression_1d.data import generator
from ltr.regression_1d.ensemble import ensemble_loss, train_ensemble
from ltr.train_settings.regression_1d import SETTINGS

R, B, M = 3, 8, 40

#: (setting, config overrides): every method, ML-MCMC with 4 steps long enough that the drift matters.
CASES = [
    ("ml_is", {}),
    ("kld_is", {}),
    ("nce", {}),
    ("nce_plus", {}),
    ("ml_mcmc_1", {"mcmc_steps": 4, "mcmc_step_length": 0.5}),
    ("sm", {}),
    ("dsm", {}),
]


def _batch(seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(R, B, 1, generator=g) * 6 - 3
    return x, torch.sin(x) + 0.3 * torch.randn(R, B, 1, generator=g)


def _grad(module: torch.nn.Module, name: str) -> torch.Tensor:
    p = getattr(module, name)
    return torch.zeros_like(p) if p.grad is None else p.grad


def _members_loss(models, method, x, y, gen, shared: bool) -> torch.Tensor:
    """(R,) mean loss per member from ltr.ebm with standalone models: one batch of R*B examples, example
    (r, i) scored by ``models[r]``; with ``shared`` one ltr.ebm call per member, in member order."""
    if shared:
        return torch.stack(
            [method(lambda c, k=k: models[k](x[k], c), y[k], generator=gen).loss for k in range(R)]
        )

    def score_fn(c: torch.Tensor) -> torch.Tensor:  # (R*B, S, 1) -> (R*B, S)
        return torch.cat([models[k](x[k], c[k * B : (k + 1) * B]) for k in range(R)])

    return method(score_fn, y.reshape(R * B, 1), generator=gen, reduction="none").loss.view(R, B).mean(1)


@pytest.mark.parametrize(
    ("setting", "overrides", "shared"),
    [(s, o, False) for s, o in CASES] + [(s, {}, True) for s in ("ml_is", "kld_is", "nce", "nce_plus")],
)
def test_ensemble_loss_equals_each_member_on_its_own(setting, overrides, shared):
    config = SETTINGS[setting]().replace(dataset=2, num_samples=M, shared_samples=shared, **overrides)
    method = config.build_method()
    x, y = _batch()
    models = [Toy1DNet(generator=generator(0, r, "init")) for r in range(R)]
    ens = Toy1DEnsemble(R, generators=[generator(0, r, "init") for r in range(R)])

    gen_ens, gen_ref = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    loss = ensemble_loss(ens, method, x, y, generator=gen_ens, shared_samples=shared)
    want = _members_loss(models, method, x, y, gen_ref, shared)
    assert loss.shape == (R,) and want.abs().min() > 1e-4  # a nonzero loss per member
    torch.testing.assert_close(loss, want, rtol=1e-5, atol=1e-5)
    # both consumed the same random numbers
    assert torch.equal(torch.randn(4, generator=gen_ens), torch.randn(4, generator=gen_ref))

    loss.sum().backward()
    want.sum().backward()
    for r, model in enumerate(models):
        for name, _, _ in LAYERS:  # a parameter the loss does not reach (SM, DSM: fc4_xy's bias) has none
            layer = getattr(model, name)
            pairs = (
                (_grad(ens, f"{name}_w")[r], _grad(layer, "weight").t()),
                (_grad(ens, f"{name}_b")[r, 0], _grad(layer, "bias")),
            )
            for got, want in pairs:
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=name)


def test_members_per_chunk_restricts_each_pass_to_its_members():
    """A member slice computes those members' loss: the same value as the whole ensemble with their rows."""
    config = SETTINGS["nce_plus"]().replace(dataset=2, num_samples=M, shared_samples=True)
    method = config.build_method()
    x, y = _batch(3)
    ens = Toy1DEnsemble(R, generators=[generator(0, r, "init") for r in range(R)])
    full = ensemble_loss(ens, method, x, y, generator=torch.Generator().manual_seed(1), shared_samples=True)
    gen = torch.Generator().manual_seed(1)
    parts = [
        ensemble_loss(ens, method, x[sl], y[sl], generator=gen, shared_samples=True, runs=sl)
        for sl in (slice(0, 2), slice(2, 3))
    ]
    torch.testing.assert_close(torch.cat(parts), full, rtol=1e-6, atol=1e-6)


def test_short_ml_mcmc_ensemble_training_is_finite():
    torch.set_num_threads(1)
    config = SETTINGS["ml_mcmc_1"]().replace(
        dataset=2, epochs=2, num_train=64, num_samples=32, mcmc_steps=4, lr=3e-3
    )
    training = train_ensemble(config, 2)
    assert training.losses.shape == (2, 2)
    assert torch.isfinite(training.losses).all()
    assert (training.losses != 0).all()
    assert all(torch.isfinite(p).all() for p in training.ensemble.parameters())
