"""Sample memory: weights, replacement of the weakest non-initial sample, the initial samples' minimum share."""

import pytest
import torch

from pytracking.tracker.dimp.memory import SampleMemory


def make(size=20, num_init=5, min_weight=0.25):
    mem = SampleMemory(size, init_min_weight=min_weight)
    feats = torch.arange(num_init, dtype=torch.float32).reshape(num_init, 1, 1, 1).expand(num_init, 2, 3, 3)
    mem.initialize(feats.clone(), torch.ones(num_init, 4))
    return mem


def test_initial_weights_and_first_update():
    mem = make()
    f, b, w = mem.filled()
    assert f.shape == (5, 2, 3, 3) and b.shape == (5, 4)
    assert w.tolist() == pytest.approx([0.2] * 5)
    mem.add(torch.full((1, 2, 3, 3), 100.0), torch.tensor([1.0, 2.0, 3.0, 4.0]), 0.01)
    f, b, w = mem.filled()
    assert len(w) == 6
    assert float(w[5]) == pytest.approx(0.01)
    assert w[:5].tolist() == pytest.approx([0.99 / 5] * 5)
    assert float(f[5].mean()) == 100.0 and b[5].tolist() == [1.0, 2.0, 3.0, 4.0]


def test_full_memory_replaces_the_lightest_non_initial_sample():
    mem = make(size=8, num_init=3)
    for k in range(5):  # fills slots 3..7 with features 10..14 (older = lighter)
        mem.add(torch.full((1, 2, 3, 3), 10.0 + k), torch.zeros(4), 0.1)
    assert mem.count == 8
    mem.add(torch.full((1, 2, 3, 3), 99.0), torch.zeros(4), 0.1)
    f, _, w = mem.filled()
    means = [float(x.mean()) for x in f]
    assert means[:3] == [0.0, 1.0, 2.0]  # initial samples kept
    assert 10.0 not in means and 99.0 in means  # the oldest update sample was replaced
    assert float(w.sum()) == pytest.approx(1.0)


def test_initial_samples_keep_their_minimum_share():
    mem = make(size=10, num_init=4, min_weight=0.25)
    for _ in range(200):
        mem.add(torch.zeros(1, 2, 3, 3), torch.zeros(4), 0.2)
        _, _, w = mem.filled()
        assert float(w[:4].sum()) >= 0.25 - 1e-6
        assert float(w.sum()) == pytest.approx(1.0, abs=1e-5)
    assert float(w[:4].sum()) == pytest.approx(0.25, abs=1e-5)
    assert w[:4].tolist() == pytest.approx([0.0625] * 4, abs=1e-6)


def test_too_many_initial_samples():
    with pytest.raises(ValueError, match="do not fit"):
        SampleMemory(3, init_min_weight=0.25).initialize(torch.zeros(4, 1, 1, 1), torch.zeros(4, 4))
