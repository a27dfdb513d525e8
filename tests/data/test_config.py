import pytest

from ltr.admin.config import ConfigError, apply_overrides, from_dict, to_dict
from ltr.data.config import DataConfig
from ltr.data.processing import DiMPProcessing


def test_superdimp_defaults():
    cfg = DataConfig()
    assert (cfg.crop_size, cfg.feature_size, cfg.search_area_factor) == (352, 22, 6.0)
    assert cfg.label_sigma_cells == pytest.approx(22 * 0.25 / 6.0)
    assert (cfg.center_jitter_train, cfg.center_jitter_test) == (3.0, 5.5)
    assert (cfg.scale_jitter_train, cfg.scale_jitter_test) == (0.25, 0.5)
    assert (cfg.crop_mode, cfg.max_scale_change) == ("inside_major", 1.5)
    assert (cfg.num_train_frames, cfg.num_test_frames, cfg.max_gap, cfg.min_visible_frames) == (3, 3, 200, 12)
    method = DiMPProcessing(cfg).method
    assert type(method).__name__ == "NCEPlus" and method.num_samples == 127 and method.beta == 0.1


def test_overrides_and_json_round_trip():
    cfg = apply_overrides(
        DataConfig(),
        ["crop_size=288", "search_area_factor=5", 'box_method_kwargs={"num_samples": 63, "beta": 0.2}'],
    )
    assert cfg.feature_size == 18 and cfg.box_method_kwargs == {"num_samples": 63, "beta": 0.2}
    again = from_dict(DataConfig, to_dict(cfg))
    assert again.crop_size == 288 and again.normalize_mean == cfg.normalize_mean
    assert DiMPProcessing(again).method.num_samples == 63
    with pytest.raises(ConfigError, match="unknown config key"):
        apply_overrides(DataConfig(), ["crop=3"])
    with pytest.raises(ValueError, match="multiple of feature_stride"):
        DataConfig(crop_size=100)
