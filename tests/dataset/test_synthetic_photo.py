"""The classic look's photo-like options: natural-statistics backgrounds, grey backgrounds, targets that are
regions of a natural-statistics image (``SyntheticConfig.photo_background``, ``grey_background``,
``photo_target``)."""

from __future__ import annotations

import numpy as np
import pytest

from ltr.dataset.synthetic import synthetic_dataset
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, simulate
from tests.dataset.test_synthetic_natural import amplitude_slope

CLASSIC = SyntheticConfig(num_frames=12)


def test_options_are_probabilities_off_by_default_and_out_of_old_markers():
    config = SyntheticConfig()
    assert (config.photo_background, config.grey_background, config.photo_target) == (0.0, 0.0, 0.0)
    assert not {"photo_background", "grey_background", "photo_target"} & set(config.to_dict())
    on = SyntheticConfig(photo_background=0.5, grey_background=1.0, photo_target=0.25)
    assert SyntheticConfig(**on.to_dict()) == on
    for name in ("photo_background", "grey_background", "photo_target"):
        with pytest.raises(ValueError, match=name):
            SyntheticConfig(**{name: 1.5})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_photo_background_has_the_spectrum_of_a_photograph(seed):
    photo = build_assets(simulate(CLASSIC.replace(photo_background=1.0), seed, 0)).background
    classic = build_assets(simulate(CLASSIC, seed, 0)).background
    assert -1.3 < amplitude_slope(photo.astype(np.float64)) < -0.75
    assert amplitude_slope(classic.astype(np.float64)) < -1.3


def test_grey_background_keeps_coloured_objects():
    scene = simulate(CLASSIC.replace(grey_background=1.0), 4, 3)
    assets = build_assets(scene)
    background = assets.background.astype(int)
    assert np.abs(background - background[..., :1]).max() <= 1  # R = G = B
    target = assets.target.astype(int)
    assert np.abs(target - target.mean(axis=-1, keepdims=True)).mean() > 10  # the target keeps its colours
    colour = build_assets(simulate(CLASSIC, 4, 3)).background.astype(int)
    assert np.abs(colour - colour.mean(axis=-1, keepdims=True)).mean() > 10


def test_photo_targets_are_regions_of_one_natural_image():
    config = CLASSIC.replace(photo_target=1.0, distractors=(2, 2))
    targets, gaps = [], []
    for index in range(6):
        assets = build_assets(simulate(config, 5, index))
        mean = assets.target.reshape(-1, 3).mean(0)
        targets.append(mean)
        gaps += [np.abs(d.reshape(-1, 3).mean(0) - mean).mean() for d in assets.distractors]
    between = [np.abs(a - b).mean() for i, a in enumerate(targets) for b in targets[i + 1 :]]
    # Look-alikes (other regions of the same image) are closer in colour than other sequences' targets.
    assert np.median(gaps) < 0.5 * np.median(between)


def test_options_change_pixels_not_motion_or_boxes():
    config = CLASSIC.replace(photo_background=1.0, grey_background=1.0, photo_target=1.0)
    plain, photo = simulate(CLASSIC, 6, 2), simulate(config, 6, 2)
    np.testing.assert_array_equal(plain.boxes, photo.boxes)
    a = render_frame(plain, build_assets(plain), 5).astype(int)
    b = render_frame(photo, build_assets(photo), 5).astype(int)
    assert np.abs(a - b).mean() > 10
    again = simulate(config, 6, 2)
    np.testing.assert_array_equal(b, render_frame(again, build_assets(again), 5))


def test_dataset_option_reaches_the_generator():
    data = synthetic_dataset(split="val", num_sequences=2, num_frames=4, grey_background=1.0)
    assert data.config.grey_background == 1.0
    first = data.get_sequence(data.sequence_names()[0]).frame(0).astype(int)
    plain = synthetic_dataset(split="val", num_sequences=2, num_frames=4)
    assert np.abs(first - plain.get_sequence(plain.sequence_names()[0]).frame(0).astype(int)).mean() > 5
