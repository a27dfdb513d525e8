"""Sample memory: weights, replacement of the weakest non-initial sample, the initial samples' minimum share."""

import pytest
import torch

from pytracking.tracker.dimp.memory import SampleMemory
from pytracking.tracker.host_reads import HostReads


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


def _sync_free(size=8, num_init=3):
    mem = SampleMemory(size, init_min_weight=0.25, sync_free=True)
    feats = torch.arange(num_init, dtype=torch.float32).reshape(num_init, 1, 1, 1).expand(num_init, 2, 3, 3)
    mem.initialize(feats.clone(), torch.ones(num_init, 4))
    return mem


def test_sync_free_memory_follows_the_counting_memory_and_masks_updates():
    """Every slot with zero-weight unused ones; a masked-off update changes nothing; a masked-on one is the
    counting memory's, also once the memory is full (lightest non-initial sample replaced)."""
    counting, free = make(size=8, num_init=3), _sync_free(size=8, num_init=3)
    learn_flags = [True, False, True, True, False, True, True, True, True, False, True]
    for i, learn in enumerate(learn_flags):
        feature, box = torch.full((1, 2, 3, 3), 10.0 + i), torch.tensor([i, 2.0, 3.0, 4.0])
        lr = 0.3 if i % 3 else 0.1
        before = [t.clone() for t in free.filled()]
        free.add(feature, box, torch.tensor(lr), torch.tensor(learn))
        if learn:
            counting.add(feature, box, lr)
        else:
            assert all(torch.equal(a, b) for a, b in zip(before, free.filled(), strict=True))
        f, b, w = free.filled()
        assert f.shape[0] == 8 and float(w.sum()) == pytest.approx(1.0)
        k = counting.count
        assert torch.all(w[k:] == 0)
        for got, want in zip((f[:k], b[:k], w[:k]), counting.filled(), strict=True):
            torch.testing.assert_close(got, want)
    assert counting.count == 8  # the run filled the memory and replaced samples


def test_sync_free_update_reads_nothing_on_the_host():
    """A device learning rate is copied into the weights, not filled (index_fill reads its value)."""
    free = _sync_free(size=8, num_init=3)
    with HostReads() as reads:
        for i in range(7):
            free.add(torch.full((1, 2, 3, 3), 1.0 * i), torch.ones(4), torch.tensor(0.2), torch.tensor(True))
    assert reads.names == [] and reads.uploads == []
    # the weights the copied rate gives: the newest sample holds 0.2 before normalisation
    counting = make(size=8, num_init=3)
    for i in range(7):
        counting.add(torch.full((1, 2, 3, 3), 1.0 * i), torch.ones(4), 0.2)
    torch.testing.assert_close(free.filled()[2], counting.filled()[2])


def test_learn_flag_needs_a_sync_free_memory():
    with pytest.raises(ValueError, match="sync_free"):
        make().add(torch.zeros(1, 2, 3, 3), torch.ones(4), 0.1, torch.tensor(True))
