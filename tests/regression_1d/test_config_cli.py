"""Settings, overrides, unknown keys and the run_training entry for regression_1d."""

import json

import pytest

from ltr.admin.config import ConfigError, apply_overrides
from ltr.cli import train as train_cli
from ltr.regression_1d.config import Regression1DConfig
from ltr.train_settings import MODULES
from ltr.train_settings.regression_1d import SETTINGS

ALL = ["ml_is", "ml_mcmc_1", "ml_mcmc_16", "ml_mcmc_256", "kld_is", "nce", "sm", "dsm", "nce_plus"]


def test_settings_carry_the_papers_hyperparameters():
    assert sorted(SETTINGS) == sorted(ALL)
    assert MODULES["regression_1d"].SETTINGS is SETTINGS
    assert SETTINGS["ml_is"]().sigmas == (0.2, 1.6)
    assert SETTINGS["kld_is"]().label_sigma == 0.025
    assert SETTINGS["nce"]().sigmas == (0.1, 0.8)
    plus = SETTINGS["nce_plus"]()
    assert plus.sigmas == (0.1, 0.8) and plus.beta == 0.025
    assert [SETTINGS[f"ml_mcmc_{k}"]().mcmc_steps for k in (1, 16, 256)] == [1, 16, 256]
    for s in ALL:
        c = SETTINGS[s]()
        assert (c.epochs, c.batch_size, c.lr, c.num_samples, c.num_train) == (75, 32, 1e-3, 1024, 2000)
    mcmc = SETTINGS["ml_mcmc_16"]()
    assert mcmc.method_kwargs()["step_length"] == 0.05
    assert mcmc.replace(dataset=2).method_kwargs()["step_length"] == 0.0125
    dsm = SETTINGS["dsm"]()
    assert dsm.method_kwargs()["sigma"] == 0.2 and dsm.replace(dataset=2).method_kwargs()["sigma"] == 0.075
    assert dsm.replace(dsm_sigma=0.1, dataset=2).method_kwargs()["sigma"] == 0.1
    built = SETTINGS["nce_plus"]().build_method()
    assert type(built).__name__ == "NCEPlus" and built.num_samples == 1024


def test_overrides_convert_types_and_reject_unknown_keys():
    c = apply_overrides(
        SETTINGS["ml_is"](), ["dataset=2", "epochs=3", "seed=7", "sigmas=0.3,1.0", "shared_samples=true"]
    )
    assert (c.dataset, c.epochs, c.seed, c.sigmas, c.shared_samples) == (2, 3, 7, (0.3, 1.0), True)
    with pytest.raises(ConfigError, match="unknown config key 'bogus'"):
        apply_overrides(SETTINGS["ml_is"](), ["bogus=1"])
    with pytest.raises(ConfigError, match="dataset"):
        apply_overrides(SETTINGS["ml_is"](), ["dataset=3"])
    with pytest.raises(ConfigError, match="epochs"):
        apply_overrides(SETTINGS["ml_is"](), ["epochs=abc"])
    with pytest.raises(ConfigError, match="method"):
        Regression1DConfig(method="nope")


def test_run_training_rejects_unknown_key_and_setting(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        train_cli.main(["regression_1d", "nce", "bogus=1", "--workspace", str(tmp_path)])
    assert exc.value.code == 2 and "error: unknown config key 'bogus'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        train_cli.main(["regression_1d", "nope", "--workspace", str(tmp_path)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "error: unknown regression_1d train setting 'nope'; choose one of [" in err
    assert not any(tmp_path.iterdir())


def test_run_training_trains_evaluates_and_resumes(tmp_path, capsys):
    args = [
        "regression_1d",
        "nce_plus",
        "dataset=2",
        "num_train=96",
        "num_samples=64",
        "eval_grid=64",
        "seed=3",
    ]
    train_cli.main([*args, "epochs=1", "--workspace", str(tmp_path), "--device", "cpu"])
    run = tmp_path / "regression_1d" / "nce_plus" / "dataset2_seed3"
    first = json.loads((run / "results.json").read_text())
    assert first["epochs"] == 1 and first["dkl"] > 0
    assert (run / "ep0001.pth.tar").is_file() and (run / "density.png").is_file()
    assert json.loads((run / "config.json").read_text())["num_train"] == 96
    # the finished run is not overwritten without --resume
    with pytest.raises(SystemExit) as exc:
        train_cli.main([*args, "epochs=2", "--workspace", str(tmp_path), "--device", "cpu"])
    assert exc.value.code == 2 and "pass --resume" in capsys.readouterr().err
    train_cli.main([*args, "epochs=2", "--resume", "--workspace", str(tmp_path), "--device", "cpu"])
    assert f"resumed from {run / 'ep0001.pth.tar'} (epoch 1)" in capsys.readouterr().err
    second = json.loads((run / "results.json").read_text())
    assert second["epochs"] == 2 and second["dkl"] != first["dkl"]
    # resuming with a different config is refused
    with pytest.raises(SystemExit) as exc:
        train_cli.main(
            [*args, "epochs=3", "lr=0.01", "--resume", "--workspace", str(tmp_path), "--device", "cpu"]
        )
    assert exc.value.code == 2 and "different config" in capsys.readouterr().err
