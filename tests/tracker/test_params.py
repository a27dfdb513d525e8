"""Parameter sets and the geometry they take from the network's saved config."""

import dataclasses

import pytest

from ltr.admin.config import to_dict
from ltr.train_settings.dimp import SETTINGS
from pytracking.parameter.dimp import PARAMETERS, get_parameters
from pytracking.tracker.dimp import load_network
from pytracking.tracker.dimp.network import NoCheckpointError, default_checkpoint
from pytracking.tracker.dimp.params import DiMPParams, geometry_from_train_config
from tests.tracker.helpers import write_tiny_checkpoint

REFERENCE = ("dimp50", "super_dimp", "prdimp50")


@pytest.mark.parametrize("name", PARAMETERS.names)
def test_parameter_sets_load(name):
    p = get_parameters(name)
    assert isinstance(p, DiMPParams)
    assert p.train_setting is None if name in REFERENCE else p.train_setting in SETTINGS
    assert p.memory_size == 50 and p.learning_rate == 0.01 and p.init_samples_min_weight == 0.25
    assert p.augmentation.num_samples == 15
    assert p.refine and p.refine_mode == "plain"
    # the tiny sets' localisation values were chosen on the synthetic val split; the others keep pytracking's
    assert p.target_not_found_threshold == (0.05 if "tiny" in name else {"prdimp50": 0.04}.get(name, 0.25))
    assert p.score_window == (1.0 if "tiny" in name else 0.0)
    assert p.hard_negative_threshold == (0.2 if "tiny" in name else 0.5)
    assert p.displacement_scale == (0.5 if "tiny" in name else 0.8)
    # box refinement: DiMP-50's own; the tiny sets stop SuperDiMP's ascent after 5 steps (val split too)
    expected = {"dimp50": (5, 1.0, "default")}.get(name, (5 if "tiny" in name else 10, 2.5e-3, "relative"))
    assert (p.refine_iters, p.refine_step, p.refine_space) == expected
    assert p.scale_learning_rate == (0.25 if "tiny" in name else 1.0)  # the tiny sets damp the size update
    assert p.aspect_learning_rate == (0.05 if "tiny" in name else None)  # and the aspect more


def test_the_longer_tiny_recipe_tracks_with_the_demo_values_and_its_own_checkpoints():
    tiny, long = get_parameters("nce_plus_tiny"), get_parameters("nce_plus_tiny_long")
    assert long.train_setting == "nce_plus_tiny_long"
    assert dataclasses.replace(long, train_setting="nce_plus_tiny") == tiny


def test_reference_sets_hold_pytrackings_values():
    """pytracking's pytracking/parameter/dimp/{dimp50,super_dimp,prdimp50}.py, value for value."""
    common = {
        "init_optim_iter": 10,
        "update_optim_iter": 2,
        "hard_negative_optim_iter": 1,
        "train_skipping": 20,
        "distractor_threshold": 0.8,
        "hard_negative_threshold": 0.5,
        "target_neighborhood_scale": 2.2,
        "displacement_scale": 0.8,
        "hard_negative_learning_rate": 0.02,
        "update_scale_when_uncertain": True,
        "advanced_localization": True,
        "num_random_boxes": 9,
        "box_jitter_pos": 0.1,
        "box_jitter_size": 0.5,
        "max_aspect_ratio": 6.0,
        "refine_top_k": 3,
        "refine_decay": 1.0,
        "score_window": 0.0,
    }
    specific = {
        "dimp50": {
            "refine_space": "default",
            "refine_iters": 5,
            "refine_step": 1.0,
            "score_preprocess": "none",
        },
        "super_dimp": {"refine_space": "relative", "refine_iters": 10, "refine_step": 2.5e-3},
        "prdimp50": {"refine_space": "relative", "refine_iters": 10, "refine_step": 2.5e-3},
    }
    for name in REFERENCE:
        p = get_parameters(name)
        for key, value in {**common, **specific[name]}.items():
            assert getattr(p, key) == value, (name, key)
        aug = p.augmentation
        assert aug.fliplr and aug.rotations == (10.0, -10.0, 45.0, -45.0)
        assert aug.blurs == ((3.0, 1.0), (1.0, 3.0), (2.0, 2.0))
        assert aug.relative_shifts == ((0.6, 0.6), (-0.6, 0.6), (0.6, -0.6), (-0.6, -0.6))
        assert (aug.dropout_num, aug.dropout_prob, aug.expansion_factor) == (2, 0.2, 2.0)
        assert aug.random_shift_factor == pytest.approx(1 / 3)
    assert get_parameters("prdimp50").score_preprocess == "softmax"
    assert get_parameters("prdimp50").target_not_found_threshold == 0.04
    assert get_parameters("super_dimp").target_not_found_threshold == 0.25
    # DiMP-NCE+ and the other EBM box heads track with SuperDiMP's values
    assert dataclasses.replace(get_parameters("nce_plus"), train_setting=None) == get_parameters("super_dimp")


def test_unknown_parameter_set():
    with pytest.raises(KeyError, match="unknown dimp parameter set"):
        get_parameters("super_fast")


def test_geometry_comes_from_the_train_config():
    g = geometry_from_train_config(to_dict(SETTINGS["nce_plus"]()))
    assert (g.crop_size, g.search_area_factor, g.feature_stride) == (352, 6.0, 16)
    assert (g.crop_mode, g.max_scale_change) == ("inside_major", 1.5)
    tiny = geometry_from_train_config(to_dict(SETTINGS["nce_plus_tiny"]()))
    assert tiny.crop_size == 128
    data = to_dict(SETTINGS["nce_plus"]())
    del data["data"]["crop_mode"]
    with pytest.raises(KeyError, match="crop_mode"):
        geometry_from_train_config(data)


def test_checkpoint_geometry_and_weights(tmp_path):
    path = write_tiny_checkpoint(tmp_path / "ep0001.pth.tar", crop_size=48)
    loaded = load_network(path)
    assert loaded.geometry.crop_size == 48
    assert not any(p.requires_grad for p in loaded.net.parameters())
    assert not loaded.net.training


def test_default_checkpoint_names_the_training_command(tmp_path):
    with pytest.raises(NoCheckpointError, match="python ltr/run_training.py dimp nce_plus_tiny"):
        default_checkpoint("nce_plus_tiny", tmp_path)
    folder = tmp_path / "checkpoints" / "dimp" / "nce_plus_tiny"
    write_tiny_checkpoint(folder / "ep0002.pth.tar")
    write_tiny_checkpoint(folder / "ep0010.pth.tar")
    assert default_checkpoint("nce_plus_tiny", tmp_path).name == "ep0010.pth.tar"


def test_params_validation():
    with pytest.raises(ValueError, match="memory_size"):
        DiMPParams(memory_size=10)
    assert dataclasses.replace(DiMPParams(), refine=False).refine is False


def test_refine_space_and_score_preprocess_are_checked():
    with pytest.raises(ValueError, match="refine_space"):
        DiMPParams(refine_space="absolute")
    with pytest.raises(ValueError, match="score_preprocess"):
        DiMPParams(score_preprocess="exp")


def test_aspect_learning_rate_is_none_or_in_unit_interval():
    assert DiMPParams().aspect_learning_rate is None  # the per-side blend at scale_learning_rate
    DiMPParams(aspect_learning_rate=0.0)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="aspect_learning_rate"):
            DiMPParams(aspect_learning_rate=bad)


def test_scale_learning_rate_must_be_in_half_open_unit_interval():
    assert DiMPParams().scale_learning_rate == 1.0  # the reference: the refined size replaces the old one
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError, match="scale_learning_rate"):
            DiMPParams(scale_learning_rate=bad)


def test_score_window_must_be_in_unit_interval():
    from pytracking.tracker.dimp import DiMPParams

    assert DiMPParams().score_window == 0.0  # the paper's DiMP settings: no motion prior
    with pytest.raises(ValueError, match="score_window"):
        DiMPParams(score_window=1.2)
    with pytest.raises(ValueError, match="score_window"):
        DiMPParams(score_window=-0.1)
