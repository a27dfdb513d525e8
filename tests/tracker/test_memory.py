"""The sample memory's weights follow pytracking's DiMP rule (hand-computed cases)."""

from __future__ import annotations

import copy

import pytest
import torch

from pytracking.tracker.dimp.memory import SampleMemory, add_samples


def make(size: int = 5, num_init: int = 3, init_min_weight: float | None = 0.25) -> SampleMemory:
    mem = SampleMemory(size, init_min_weight=init_min_weight)
    feats = torch.arange(num_init, dtype=torch.float32).reshape(num_init, 1, 1, 1).expand(num_init, 2, 3, 3)
    mem.initialize(feats.clone(), torch.arange(num_init * 4, dtype=torch.float32).reshape(num_init, 4))
    return mem


def sample(value: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((1, 2, 3, 3), value), torch.full((4,), value)


def test_first_update_divides_by_one_minus_lr_then_chains_from_the_newest_weight():
    mem = make()
    mem.add(*sample(10.0), lr=0.1)
    w = [1 / 3 / 0.9] * 3 + [0.1]
    total = sum(w)
    w = [v / total for v in w] + [0.0]
    torch.testing.assert_close(mem.weights, torch.tensor(w), rtol=1e-6, atol=1e-7)
    mem.add(*sample(11.0), lr=0.1)
    w[4] = w[3] / 0.9
    total = sum(w)
    w = [v / total for v in w]
    torch.testing.assert_close(mem.weights, torch.tensor(w), rtol=1e-6, atol=1e-7)
    # full: the non-initial slot of smallest weight (slot 3) is replaced, with the newest weight (slot 4) / 0.9
    mem.add(*sample(12.0), lr=0.1)
    w[3] = w[4] / 0.9
    total = sum(w)
    w = [v / total for v in w]
    torch.testing.assert_close(mem.weights, torch.tensor(w), rtol=1e-6, atol=1e-7)
    feats, boxes, weights = mem.filled()
    assert feats.shape[0] == 5 and mem.num_stored == 6
    assert feats[3, 0, 0, 0] == 12.0 and feats[4, 0, 0, 0] == 11.0 and boxes[3, 0] == 12.0
    assert float(weights.sum()) == pytest.approx(1.0, abs=1e-6)


def test_initial_samples_keep_their_minimum_weight():
    """When the initial samples' share falls below the minimum m, the weights are divided by m + (the others'
    sum) and each initial sample gets m / n: the total is then not exactly 1 (the reference's arithmetic)."""
    mem = make(size=8, num_init=2, init_min_weight=0.25)
    w = [0.5, 0.5] + [0.0] * 6
    prev = None
    for k in range(5):
        mem.add(*sample(float(k)), lr=0.5)
        index = 2 + k
        if prev is None:
            w = [v / 0.5 for v in w]
            w[index] = 0.5
        else:
            w[index] = w[prev] / 0.5
        prev = index
        total = sum(w)
        w = [v / total for v in w]
        if w[0] + w[1] < 0.25:
            rest = sum(w[2:])
            w = [0.125, 0.125] + [v / (0.25 + rest) for v in w[2:]]
        torch.testing.assert_close(mem.weights, torch.tensor(w), rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(mem.weights[:2], torch.tensor([0.125, 0.125]))
    assert float(mem.weights.sum()) != pytest.approx(1.0, abs=1e-3)


def test_without_a_minimum_the_initial_samples_may_be_replaced():
    mem = make(size=3, num_init=3, init_min_weight=None)
    mem.add(*sample(7.0), lr=0.5)
    # full from the start: argmin over every slot (all equal) -> slot 0
    assert mem.features[0, 0, 0, 0] == 7.0
    total = 0.5 + 2 * (1 / 3 / 0.5)
    torch.testing.assert_close(mem.weights, torch.tensor([0.5, 2 / 3, 2 / 3]) / total)


def test_learning_rate_one_keeps_only_the_new_sample():
    mem = make(init_min_weight=None)
    mem.add(*sample(3.0), lr=1.0)
    torch.testing.assert_close(mem.weights, torch.tensor([1.0, 0, 0, 0, 0]))


def test_errors():
    with pytest.raises(ValueError, match="do not fit"):
        SampleMemory(2, init_min_weight=0.25).initialize(torch.zeros(3, 1, 1, 1), torch.zeros(3, 4))
    with pytest.raises(RuntimeError, match="before initialize"):
        SampleMemory(2, init_min_weight=0.25).add(torch.zeros(1, 1, 1, 1), torch.zeros(4), 0.1)


def test_filled_pads_past_the_samples_held_with_zero_weight():
    mem = make(size=5, num_init=3)
    assert mem.count == 3
    feats, boxes, weights = mem.filled(5)
    assert feats.shape == (5, 2, 3, 3) and boxes.shape == (5, 4) and weights.shape == (5,)
    held, held_boxes, held_weights = mem.filled()
    assert torch.equal(feats[:3], held) and torch.equal(boxes[:3], held_boxes)
    assert torch.equal(weights[:3], held_weights)
    assert not feats[3:].any() and not boxes[3:].any() and not weights[3:].any()
    with pytest.raises(ValueError, match="count must be within 0..5"):
        mem.filled(6)


def test_samples_added_together_are_each_added_alone():
    """add_samples on memories in every state (empty of updates, chained, full with the slot of least weight
    replaced, under the initial samples' minimum, restarted by lr = 1): each memory's weights, slots and
    samples are the ones it gets alone, bit for bit."""
    gen = torch.Generator().manual_seed(0)
    memories = []
    for updates in (0, 1, 2, 4, 6, 9):
        mem = make(size=6, num_init=2, init_min_weight=0.3)
        for u in range(updates):
            mem.add(*sample(float(u)), lr=float(torch.rand(1, generator=gen)) * 0.5 + 0.05)
        memories.append(mem)
    memories.append(make(size=6, num_init=2, init_min_weight=None))
    lrs = [0.1, 0.25, 1.0, 0.05, 0.4, 0.15, 0.3]
    features = torch.rand(len(memories), 2, 3, 3, generator=gen)
    boxes = torch.rand(len(memories), 4, generator=gen)
    alone = copy.deepcopy(memories)
    for mem, f, b, lr in zip(alone, features, boxes, lrs, strict=True):
        mem.add(f, b, lr)
    add_samples(memories, features, boxes, lrs)
    slots = set()
    for together, single in zip(memories, alone, strict=True):
        assert torch.equal(together.weights, single.weights)
        assert torch.equal(together.features, single.features) and torch.equal(together.boxes, single.boxes)
        assert (together.previous_index, together.num_stored) == (single.previous_index, single.num_stored)
        slots.add(together.previous_index)
    assert len(slots) > 2  # next free slots, replaced slots and the restart's slot 0
