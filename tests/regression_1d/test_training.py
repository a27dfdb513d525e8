"""A short ensemble training of NCE+ and ML-IS on dataset 2 learns p(y|x): D_KL falls far below untrained."""

import pytest
import torch

from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d.data import generator
from ltr.regression_1d.ensemble import train_ensemble
from ltr.regression_1d.evaluate import evaluate_ensemble
from ltr.train_settings.regression_1d import SETTINGS

EPOCHS = 5
RUNS = 2
GRID = 512  # same evaluation, coarser grid to keep the test fast
BOUND = 0.8


@pytest.fixture(scope="module")
def untrained_dkl() -> list[float]:
    ens = Toy1DEnsemble(RUNS, generators=[generator(0, r, "init") for r in range(RUNS)])
    return evaluate_ensemble(ens, 2, GRID).dkl


@pytest.mark.parametrize("setting", ["nce_plus", "ml_is"])
def test_short_training_beats_untrained(setting, untrained_dkl):
    torch.set_num_threads(1)
    config = SETTINGS[setting]().replace(dataset=2, epochs=EPOCHS, lr=3e-3)
    training = train_ensemble(config, RUNS)
    trained = evaluate_ensemble(training.ensemble, 2, GRID).dkl
    assert min(untrained_dkl) > 2.0  # an untrained network is far from p(y|x)
    for before, after in zip(untrained_dkl, trained):
        assert after < BOUND, (setting, trained)
        assert after < 0.4 * before, (setting, before, after)
    # the training loss went down for every member
    assert (training.losses[-1] < training.losses[0]).all()


def test_members_do_not_interact():
    """Changing member 1's weights changes neither member 0's loss nor its gradient (same sample stream)."""
    from ltr.regression_1d.ensemble import ensemble_loss

    config = SETTINGS["nce_plus"]().replace(dataset=2, num_samples=32)
    method = config.build_method()
    x = torch.rand(2, 8, 1) * 6 - 3
    y = torch.sin(x)
    results = []
    for scale in (1.0, 3.0):
        ens = Toy1DEnsemble(2, generators=[generator(0, r, "init") for r in range(2)])
        with torch.no_grad():
            for p in ens.parameters():
                p[1].mul_(scale)
        loss = ensemble_loss(ens, method, x, y, generator=torch.Generator().manual_seed(5))
        loss.sum().backward()
        results.append((loss.detach(), [p.grad[0].clone() for p in ens.parameters()]))
    (l1, g1), (l2, g2) = results
    assert l1[0] == l2[0] and l1[1] != l2[1]
    for a, b in zip(g1, g2):
        assert torch.equal(a, b)
