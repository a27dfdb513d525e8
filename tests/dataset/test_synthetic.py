"""The procedural synthetic videos: determinism, ground truth vs. rendered pixels, motion, dataset API."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from matplotlib.path import Path as PolyPath

from ltr.dataset.base import Sequence
from ltr.dataset.synthetic import SPLITS, SyntheticDataset, synthetic_dataset
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, sequence_names, simulate
from ltr.dataset.synthetic_texture import SHAPE_KINDS, random_shape, transform_outline

SMALL = SyntheticConfig(width=128, height=96, num_frames=40)
#: Every event switched on, to exercise out-of-view and full-occlusion frames.
HARD = SMALL.replace(occlusion_prob=1.0, full_occlusion_prob=1.0, out_of_view_prob=1.0, num_frames=60)


@pytest.fixture(autouse=True)
def _no_configured_copy(tmp_path, monkeypatch):
    """The in-memory default must not be replaced by a copy named in the caller's environment."""
    monkeypatch.delenv("SYNTHETIC_DIR", raising=False)
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "no-paths.json"))


def _render_all(config: SyntheticConfig, seed: int, index: int, layers: bool = False):
    scene = simulate(config, seed, index)
    assets = build_assets(scene)
    return scene, [render_frame(scene, assets, t, layers=layers) for t in range(scene.num_frames)]


def test_same_seed_same_pixels_and_boxes():
    scene_a, frames_a = _render_all(SMALL, 5, 2)
    scene_b, frames_b = _render_all(SMALL, 5, 2)
    np.testing.assert_array_equal(scene_a.boxes, scene_b.boxes)
    np.testing.assert_array_equal(scene_a.visible, scene_b.visible)
    for fa, fb in zip(frames_a, frames_b):
        assert fa.dtype == np.uint8 and fa.shape == (96, 128, 3)
        np.testing.assert_array_equal(fa, fb)


def test_frames_do_not_depend_on_render_order():
    scene = simulate(SMALL, 3, 0)
    forward = [render_frame(scene, build_assets(scene), t) for t in range(5)]
    assets = build_assets(scene)
    backward = [render_frame(scene, assets, t) for t in reversed(range(5))][::-1]
    for fa, fb in zip(forward, backward):
        np.testing.assert_array_equal(fa, fb)


def test_different_seeds_and_indices_differ():
    base, frames = _render_all(SMALL, 5, 2)
    for seed, index in ((6, 2), (5, 3)):
        other = simulate(SMALL, seed, index)
        assert np.abs(other.boxes - base.boxes).max() > 5.0
        other_frame = render_frame(other, build_assets(other), 0)
        assert np.abs(other_frame.astype(int) - frames[0].astype(int)).mean() > 10.0


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_shape_outline_is_normalised_and_matches_sdf(kind):
    rng = np.random.default_rng(0)
    for _ in range(5):
        shape = random_shape(rng, kind)
        outline = shape.outline
        np.testing.assert_allclose(outline.min(axis=0), [-1, -1], atol=1e-9)
        np.testing.assert_allclose(outline.max(axis=0), [1, 1], atol=1e-9)
        # The outline is the zero level set: points on it have |sdf| ~ 0, points pulled inwards are inside.
        assert np.abs(shape.sdf(outline[:, 0], outline[:, 1])).max() < 1e-3
        inner = outline * 0.9
        assert (shape.sdf(inner[:, 0], inner[:, 1]) < 0).all()
        outer = outline * 1.1
        assert (shape.sdf(outer[:, 0], outer[:, 1]) > 0).all()


def test_boxes_are_tight_bounds_of_the_rendered_target():
    checked = cut = 0
    for index in range(4):
        scene, rendered = _render_all(SMALL, 11, index, layers=True)
        for t, (_, layers) in enumerate(rendered):
            mask = layers["target_alpha"] >= 0.5
            if not mask.any():
                continue
            ys, xs = np.nonzero(mask)
            x, y, w, h = scene.boxes[t]
            # Pixel i covers [i, i+1): the mask's tight bound in the same continuous coordinates.
            mask_box = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], float)
            gt = np.array([x, y, x + w, y + h])
            if gt[0] >= 0 and gt[1] >= 0 and gt[2] <= SMALL.width and gt[3] <= SMALL.height:
                assert np.abs(mask_box - gt).max() <= 1.0, (index, t, mask_box, gt)
                checked += 1
            else:
                # Cut by the border: the box keeps the full extent, so the visible part lies inside it.
                assert (mask_box[:2] >= gt[:2] - 1.0).all() and (mask_box[2:] <= gt[2:] + 1.0).all()
                cut += 1
    assert checked > 100 and cut > 0, (checked, cut)


def _visible_by_geometry(scene, t: int) -> int:
    """Pixel centres inside the target outline and outside every occluder outline (independent of sdf)."""
    cfg = scene.config
    x, y, w, h = scene.boxes[t]
    x0, y0 = max(int(np.floor(x)) - 1, 0), max(int(np.floor(y)) - 1, 0)
    x1, y1 = min(int(np.ceil(x + w)) + 1, cfg.width), min(int(np.ceil(y + h)) + 1, cfg.height)
    if x0 >= x1 or y0 >= y1:
        return 0
    ys, xs = np.mgrid[y0:y1, x0:x1]
    centres = np.stack([xs.ravel() + 0.5, ys.ravel() + 0.5], axis=1)
    target = PolyPath(transform_outline(scene.target.shape.outline, tuple(scene.target.states[t])))
    seen = target.contains_points(centres)
    for occ in scene.occluders:
        seen &= ~PolyPath(transform_outline(occ.shape.outline, tuple(occ.states[t]))).contains_points(centres)
    return int(seen.sum())


def test_invisible_exactly_when_fully_outside_or_fully_occluded():
    counts = {"out_of_view": 0, "full_occlusion": 0, "visible": 0}
    for index in range(6):
        scene, rendered = _render_all(HARD, 21, index, layers=True)
        for t, (_, layers) in enumerate(rendered):
            in_target = layers["target_alpha"] >= 0.5
            seen = in_target & (layers["occluder_alpha"] < 0.5)
            assert scene.visible[t] == bool(seen.any()), (index, t)
            assert scene.out_of_view[t] == (not in_target.any()), (index, t)
            assert scene.full_occlusion[t] == (in_target.any() and not seen.any()), (index, t)
            geometric = _visible_by_geometry(scene, t)
            if geometric > 2:
                assert scene.visible[t], (index, t, geometric)
            if geometric == 0 and seen.sum() <= 2:
                continue  # a sliver at the pixel-centre boundary; both answers are defensible
            if geometric == 0:
                assert not scene.visible[t], (index, t)
        counts["out_of_view"] += int(scene.out_of_view.sum())
        counts["full_occlusion"] += int(scene.full_occlusion.sum())
        counts["visible"] += int(scene.visible.sum())
    # The hard settings really produce every case.
    assert min(counts.values()) > 0, counts


def test_visible_target_changes_the_pixels():
    scene = simulate(SMALL, 4, 1)
    assets = build_assets(scene)
    for t in range(0, SMALL.num_frames, 5):
        if not scene.visible[t]:
            continue
        shown, layers = render_frame(scene, assets, t, layers=True)
        hidden = render_frame(scene, assets, t, hide_target=True)
        seen = (layers["target_alpha"] >= 0.5) & (layers["occluder_alpha"] < 0.5)
        assert (shown[seen] != hidden[seen]).any()
        far = np.ones_like(seen)
        x, y, w, h = scene.boxes[t]
        far[max(int(y) - 20, 0) : int(y + h) + 20, max(int(x) - 20, 0) : int(x + w) + 20] = False
        np.testing.assert_array_equal(shown[far], hidden[far])


def test_targets_are_textured_not_flat():
    stds = []
    for index in range(8):
        scene = simulate(SMALL, 31, index)
        frame, layers = render_frame(scene, build_assets(scene), 0, layers=True)
        inside = (layers["target_alpha"] >= 0.99) & (layers["occluder_alpha"] < 0.01)
        if inside.sum() < 30:
            continue
        # Largest per-channel spread inside the target (colour textures vary in hue as well as brightness).
        stds.append(frame[inside].astype(float).std(axis=0).max())
    assert len(stds) >= 5
    assert min(stds) > 10.0, stds
    assert np.median(stds) > 15.0, stds


def test_motion_is_smooth_but_not_static():
    cfg = SyntheticConfig(num_frames=120)
    moved = []
    for index in range(6):
        scene = simulate(cfg, 41, index)
        centres = scene.boxes[:, :2] + scene.boxes[:, 2:] / 2
        step = np.linalg.norm(np.diff(centres, axis=0), axis=1)
        # Centre of the tight box moves by at most the speed cap plus what rotation/scale change adds.
        assert step.max() <= cfg.max_speed * cfg.unit + 3.0, (index, step.max())
        sizes = np.sqrt(scene.boxes[:, 2] * scene.boxes[:, 3])
        assert np.abs(np.diff(np.log(sizes))).max() < 0.08
        moved.append(step.mean())
    assert min(moved) > 0.2, moved
    assert max(moved) > 1.0, moved


def test_dataset_sequences_and_attributes():
    ds = SyntheticDataset(6, seed=9, config=SMALL)
    names = ds.sequence_names()
    assert names == [name for _, name in sequence_names(9, 6)]
    assert len(set(names)) == 6 and all(name.rsplit("-", 1)[1].isdigit() for name in names)
    seq = ds.get_sequence(names[1])
    assert isinstance(seq, Sequence) and len(seq) == SMALL.num_frames
    scene = simulate(SMALL, 9, 1)
    np.testing.assert_array_equal(seq.boxes, scene.boxes)
    np.testing.assert_array_equal(seq.visible, scene.visible)
    np.testing.assert_array_equal(seq.attributes["absent"], ~scene.visible)
    assert seq.attributes["class"] == names[1].rsplit("-", 1)[0]
    assert seq.attributes["distractors"] == len(scene.distractors)
    assert seq.attributes["occlusion"].shape == (SMALL.num_frames,)
    frame = seq.frame(7)
    np.testing.assert_array_equal(frame, render_frame(scene, build_assets(scene), 7))
    frame[:] = 0  # callers get copies: the cache is not corrupted
    np.testing.assert_array_equal(seq.frame(7), render_frame(scene, build_assets(scene), 7))
    seq.boxes[:] = -1  # callers get their own arrays
    np.testing.assert_array_equal(ds.get_sequence(names[1]).boxes, scene.boxes)
    clone = pickle.loads(pickle.dumps(seq.frame_loader))
    np.testing.assert_array_equal(clone(3), seq.frame(3))
    with pytest.raises(KeyError, match="no sequence"):
        ds.get_sequence("nonexistent-1")


def test_factory_splits_and_options():
    test = synthetic_dataset()
    train = synthetic_dataset(split="train")
    assert len(test) == SPLITS["test"][1] and len(train) == SPLITS["train"][1]
    first = test.get_sequence(test.sequence_names()[0])
    assert len(first) == SPLITS["test"][2]
    assert first.frame(0).shape == (240, 320, 3)
    # Different seeds: the training set does not contain the test videos.
    assert not np.allclose(train.get_sequence(train.sequence_names()[0]).boxes[:5], first.boxes[:5])
    small = synthetic_dataset(split="val", num_sequences=3, num_frames=7, width=64, height=48)
    seq = small.get_sequence(small.sequence_names()[0])
    assert len(small) == 3 and len(seq) == 7 and seq.frame(0).shape == (48, 64, 3)
    with pytest.raises(ValueError, match="unknown split"):
        synthetic_dataset(split="bogus")
    with pytest.raises(TypeError, match="unknown SyntheticConfig option"):
        synthetic_dataset(frames=3)
    with pytest.raises(ValueError, match="num_frames"):
        synthetic_dataset(num_frames=0)


def test_registry_points_at_the_factory():
    from ltr.dataset.registry import get_dataset

    ds = get_dataset("synthetic", split="val", num_sequences=2, num_frames=3)
    assert isinstance(ds, SyntheticDataset) and len(ds) == 2


def test_default_difficulty_is_a_meaningful_mix():
    cfg = SyntheticConfig()
    scenes = [simulate(cfg, 1, i) for i in range(40)]
    # Every sequence starts with a visible target (trackers are initialised on frame 0).
    assert all(s.visible[:5].all() for s in scenes)
    invisible = np.mean([(~s.visible).mean() for s in scenes])
    assert 0.02 < invisible < 0.2, invisible
    assert 3 <= sum(s.out_of_view.any() for s in scenes) <= 20
    assert 3 <= sum(s.full_occlusion.any() for s in scenes) <= 20
    assert sum(s.occlusion.any() for s in scenes) >= 10
    assert sum(len(s.distractors) > 0 for s in scenes) >= 20
    sizes = np.array([np.sqrt(s.boxes[0, 2] * s.boxes[0, 3]) for s in scenes])
    assert sizes.min() > 10 and sizes.max() < 120, sizes


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="width/height"):
        SyntheticConfig(width=8)
    with pytest.raises(ValueError, match="occlusion_prob"):
        SyntheticConfig(occlusion_prob=1.5)
    with pytest.raises(ValueError, match="speed"):
        SyntheticConfig(speed=(0.02, 0.01))


def test_config_round_trips_through_plain_data():
    cfg = SyntheticConfig(width=64, height=48, distractors=[1, 2])
    assert cfg.distractors == (1, 2) and hash(cfg) == hash(SyntheticConfig(**cfg.to_dict()))
    assert SyntheticConfig(**cfg.to_dict()) == cfg
    assert cfg.replace(num_frames=5).num_frames == 5 and cfg.num_frames == SyntheticConfig().num_frames
