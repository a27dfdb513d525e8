import numpy as np
import pytest

from ltr.data.config import DataConfig
from ltr.data.processing import FrameSet
from ltr.data.sampler import TrackingSampler, sample_visible_ids, select_frames
from ltr.dataset.base import DatasetError
from tests.data.helpers import InMemoryDataset


def keep_frames(frames: FrameSet, rng, gen) -> FrameSet:
    """Processing that returns the loaded frames unchanged (to inspect what the sampler picked)."""
    return frames


def make_sampler(datasets, **kw) -> TrackingSampler:
    kw.setdefault("samples_per_epoch", 100)
    return TrackingSampler(datasets, keep_frames, **kw)


def test_sample_visible_ids_range_and_visibility():
    rng = np.random.default_rng(0)
    visible = np.zeros(50, dtype=bool)
    visible[[3, 10, 11, 40]] = True
    ids = sample_visible_ids(visible, 200, 5, 41, rng)
    assert set(ids) == {10, 11, 40}
    assert sample_visible_ids(visible, 2, 12, 40, rng) is None
    assert sample_visible_ids(visible, 0, 0, 50, rng) == []
    assert sample_visible_ids(visible, 1, -10, 4, rng) == [3]


def test_select_frames_causal_visible_and_within_gap():
    rng = np.random.default_rng(1)
    n = 1000
    visible = rng.random(n) < 0.7
    for _ in range(300):
        train, test, gap = select_frames(visible, 3, 3, 200, 5, rng)
        base = train[0]
        assert len(train) == 3 and len(test) == 3
        assert visible[train + test].all()
        assert max(train) == base < min(test)
        assert base - min(train) <= gap and max(test) - base < gap
        assert gap == 200  # dense visibility: found at the first try


def test_select_frames_gap_grows_when_needed():
    rng = np.random.default_rng(2)
    visible = np.zeros(600, dtype=bool)
    visible[0:5] = True
    visible[500:505] = True  # a 495-frame hole: train before it, test after it
    found = []
    for _ in range(50):
        train, test, gap = select_frames(visible, 3, 3, 200, 5, rng)
        assert visible[train + test].all() and max(train) == train[0] < min(test)
        assert train[0] - min(train) <= gap and max(test) - train[0] < gap
        found.append(gap)
    assert max(found) > 200 and all((g - 200) % 5 == 0 for g in found)


def test_sampler_respects_visibility_and_skips_unusable_sequences():
    vis_sparse = np.zeros(60, dtype=bool)
    vis_sparse[::4] = True  # 15 visible frames (> 12): usable
    vis_too_few = np.zeros(60, dtype=bool)
    vis_too_few[:12] = True  # exactly 12 visible: skipped
    vis_short = np.ones(19, dtype=bool)  # 19 frames (< 20): skipped
    ds = InMemoryDataset(
        "vis", num_sequences=3, num_frames=[60, 60, 19], visible=[vis_sparse, vis_too_few, vis_short]
    )
    sampler = make_sampler([ds])
    for i in range(40):
        seq, sel = sampler.select(sampler.generators(i)[0])
        assert seq.name == "vis_0"
        assert vis_sparse[list(sel.train_ids + sel.test_ids)].all()
        assert max(sel.train_ids) == sel.train_ids[0] < min(sel.test_ids)
    frames = sampler[0]
    assert len(frames.train_images) == 3 and frames.test_boxes.shape == (3, 4)


def test_image_dataset_repeats_the_image():
    coco = InMemoryDataset("coco", num_sequences=4, is_video=False)
    sampler = make_sampler([coco])
    seq, sel = sampler.select(np.random.default_rng(0))
    assert sel.train_ids == (0, 0, 0) and sel.test_ids == (0, 0, 0)
    frames = sampler[0]
    assert len(frames.train_images) == 3 and all(
        np.array_equal(f, frames.test_images[0]) for f in frames.train_images
    )


def test_dataset_weights():
    a, b = InMemoryDataset("a", num_sequences=1), InMemoryDataset("b", num_sequences=1)
    sampler = make_sampler([a, b], weights=[0.0, 1.0])
    assert {sampler.select(sampler.generators(i)[0])[1].dataset for i in range(20)} == {"b"}
    sampler = make_sampler([a, b], weights=[1.0, 3.0])
    names = [sampler.select(sampler.generators(i)[0])[1].dataset for i in range(400)]
    assert 0.68 < names.count("b") / 400 < 0.82
    with pytest.raises(ValueError, match="weights"):
        make_sampler([a, b], weights=[1.0])


def test_seeding_by_rank_and_index():
    ds = [InMemoryDataset("v", num_sequences=5, num_frames=300)]

    def picks(sampler, indices):
        return [sampler.select(sampler.generators(i)[0])[1] for i in indices]

    r0 = make_sampler(ds, seed=7, rank=0, world_size=2)
    r0_again = make_sampler(ds, seed=7, rank=0, world_size=2)
    r1 = make_sampler(ds, seed=7, rank=1, world_size=2)
    a, b, c = picks(r0, range(20)), picks(r0_again, range(20)), picks(r1, range(20))
    assert a == b  # deterministic
    assert sum(x == y for x, y in zip(a, c, strict=True)) <= 1  # ranks differ
    assert len(set(a)) == len(a)  # indices (hence workers and epochs) differ
    assert len(r0) == 50  # samples_per_epoch split over the world
    other_seed = picks(make_sampler(ds, seed=8, rank=0, world_size=2), range(20))
    assert sum(x == y for x, y in zip(a, other_seed, strict=True)) <= 1


def test_from_config_and_no_usable_sequence_error():
    cfg = DataConfig(crop_size=64, samples_per_epoch=10)
    sampler = TrackingSampler.from_config(cfg, [InMemoryDataset(num_frames=25)], rank=0, world_size=1)
    sample = sampler[3]
    assert sample["test_images"].shape == (3, 3, 64, 64)
    bad = make_sampler([InMemoryDataset("tiny", num_frames=10)], max_sequence_attempts=20)
    with pytest.raises(DatasetError, match="'tiny'.*20 draws"):
        bad[0]
