"""One 1D model on the generic trainer: documented seeds, exact resume, the loss falls."""

import torch

from ltr.models.toy1d import Toy1DEnsemble
from ltr.regression_1d.data import generator
from ltr.regression_1d.evaluate import evaluate_model
from ltr.regression_1d.single import build_trainer
from ltr.train_settings.regression_1d import SETTINGS

CONFIG = SETTINGS["nce_plus"]().replace(dataset=2, num_train=96, num_samples=64, seed=3)


def test_initial_weights_are_run_0_of_an_ensemble_with_the_same_seed():
    net = build_trainer(CONFIG, verbose=False).net
    member = Toy1DEnsemble(1, generators=[generator(CONFIG.seed, 0, "init")]).member(0)
    x, y = torch.linspace(-3, 3, 5)[:, None], torch.linspace(-1, 1, 7)[None, :, None].expand(5, -1, -1)
    torch.testing.assert_close(net(x, y), member(x, y), rtol=0, atol=0)


def test_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    straight = build_trainer(CONFIG.replace(epochs=3), verbose=False)
    straight.train()
    first = build_trainer(
        CONFIG.replace(epochs=1), run_dir=tmp_path, setting="regression_1d/t", verbose=False
    )
    first.train()
    resumed = build_trainer(
        CONFIG.replace(epochs=3), run_dir=tmp_path, setting="regression_1d/t", verbose=False
    )
    resumed.train(resume=True)
    assert resumed.resumed_from == tmp_path / "ep0001.pth.tar"
    a, b = straight.net.state_dict(), resumed.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in straight.history]


def test_a_short_training_learns_p_y_given_x():
    config = SETTINGS["ml_is"]().replace(dataset=2, num_train=256, num_samples=64, epochs=4, lr=1e-2)
    trainer = build_trainer(config, verbose=False)
    before = evaluate_model(trainer.net, 2, 128)[0]
    trainer.train()
    after = evaluate_model(trainer.net, 2, 128)[0]
    assert before > 3.0 and after < 0.6 * before, (before, after)
    losses = [r["loss"] for r in trainer.history]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.3 * losses[0], losses
