"""Paper settings stop at once, naming what to configure: COCO_DIR and the cached detector weights."""

import pytest

from ltr.cli.train import main as train_main
from ltr.dataset.base import DatasetError
from ltr.detection.detector import WeightsMissingError, check_pretrained_weights, pretrained_weights_path
from ltr.detection.pipeline import preflight
from ltr.train_settings.detection import SETTINGS


@pytest.fixture
def no_config(monkeypatch, tmp_path):
    monkeypatch.delenv("COCO_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "no_paths.json"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    return tmp_path


def test_missing_coco_dir_names_the_variable_and_the_tiny_setting(no_config):
    with pytest.raises(DatasetError, match="COCO_DIR") as err:
        preflight(SETTINGS["nce_plus"]())
    assert "nce_plus_tiny" in str(err.value)


def test_cli_stops_at_once_without_writing(no_config, capsys):
    workspace = no_config / "ws"
    with pytest.raises(SystemExit) as err:
        train_main(["detection", "nce_plus", "--workspace", str(workspace)])
    assert err.value.code == 2 and "COCO_DIR" in capsys.readouterr().err
    assert not workspace.exists()


def test_missing_weights_names_the_file_and_folder(no_config, monkeypatch):
    coco = no_config / "coco"
    coco.mkdir()
    monkeypatch.setenv("COCO_DIR", str(coco))
    path = pretrained_weights_path()
    assert path.name == "fasterrcnn_resnet50_fpn_coco-258fb6c6.pth"
    assert str(path).startswith(str(no_config / "torch_home"))
    with pytest.raises(WeightsMissingError) as err:
        preflight(SETTINGS["kld_is"]())
    assert path.name in str(err.value) and str(path.parent) in str(err.value)
    assert not path.exists()  # nothing was downloaded
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    assert check_pretrained_weights() == path


def test_settings_carry_the_paper_hyperparameters():
    nce_plus = SETTINGS["nce_plus"]()
    assert (nce_plus.method, nce_plus.num_samples, nce_plus.beta) == ("nce_plus", 128, 0.1)
    assert nce_plus.sigmas == (0.075, 0.15, 0.3)
    kld = SETTINGS["kld_is"]()
    assert kld.sigmas == (0.0375, 0.075, 0.15) and kld.label_sigma == 0.0225
    assert SETTINGS["ml_mcmc_8"]().mcmc_steps == 8 and SETTINGS["ml_mcmc_4"]().mcmc_alpha == 1e-5
    assert SETTINGS["dsm"]().dsm_sigma == 0.075
    assert (nce_plus.refine_steps, nce_plus.step_decay) == (10, 0.5)
    tiny = SETTINGS["nce_plus_tiny"]()
    assert (tiny.data, tiny.detector, tiny.beta) == ("synthetic", "tiny", 0.1)
    assert all(f"{m}_tiny" in SETTINGS for m in ("ml_is", "kld_is", "nce", "dsm", "ml_mcmc_1"))


def test_study_paper_mode_without_coco_exits_naming_the_variable(no_config, capsys):
    from ltr.detection.study import main as study_main

    with pytest.raises(SystemExit) as err:
        study_main(["--paper", "--methods", "nce_plus", "--workspace", str(no_config / "ws")])
    assert err.value.code == 2 and "COCO_DIR" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        study_main(["--tiny", "--methods", "nce_plus", "not_a_key=1", "--workspace", str(no_config / "ws")])
    assert err.value.code == 2 and "not_a_key" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:  # the registry's error, before anything is written
        study_main(["--tiny", "--methods", "nce_plus,mle", "--workspace", str(no_config / "ws")])
    err_text = capsys.readouterr().err
    assert err.value.code == 2
    assert err_text.startswith("error: unknown detection method 'mle'; choose one of ['ml_is', 'kld_is', ")
    assert not (no_config / "ws").exists()
