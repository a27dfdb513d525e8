"""The refinement replayed as a CUDA graph: the static-buffer plumbing (CPU) and the real graph (CUDA)."""

import dataclasses
import warnings

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.graphs import GraphedFunction
from pytracking.tracker.host_reads import HostReads
from tests.tracker.helpers import random_frame, whole_map_products

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _affine(x, w, b):
    return (x @ w + b, (x * x).sum(-1))


def test_replays_read_the_new_inputs_into_the_same_outputs():
    rng = torch.Generator().manual_seed(0)
    first = [
        torch.randn(5, 3, generator=rng),
        torch.randn(3, 2, generator=rng),
        torch.randn(2, generator=rng),
    ]
    graphed = GraphedFunction(_affine, first, capture=False)
    kept = None
    for _ in range(3):
        inputs = [torch.randn(t.shape, generator=rng) for t in first]
        out = graphed(*inputs)
        expected = _affine(*inputs)
        for got, want in zip(out, expected, strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        if kept is not None:  # the same static tensors, overwritten
            assert all(a is b for a, b in zip(out, kept, strict=True))
        kept = out
    # the inputs were copied, not aliased: changing the caller's tensor afterwards changes nothing
    inputs[0].add_(100.0)
    assert not torch.equal(graphed.static_inputs[0], inputs[0])


def test_inputs_must_keep_the_recorded_shapes_and_dtypes():
    graphed = GraphedFunction(_affine, [torch.zeros(5, 3), torch.zeros(3, 2), torch.zeros(2)], capture=False)
    with pytest.raises(ValueError, match=r"input 0 is \(4, 3\).*recorded as \(5, 3\)"):
        graphed(torch.zeros(4, 3), torch.zeros(3, 2), torch.zeros(2))
    with pytest.raises(ValueError, match="float64"):
        graphed(torch.zeros(5, 3), torch.zeros(3, 2, dtype=torch.float64), torch.zeros(2))
    with pytest.raises(ValueError, match="expected 3 inputs, got 2"):
        graphed(torch.zeros(5, 3), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="CUDA graph needs inputs on one CUDA device"):
        GraphedFunction(_affine, [torch.zeros(5, 3), torch.zeros(3, 2), torch.zeros(2)])


@pytest.fixture(scope="module")
def scene():
    rng = np.random.default_rng(5)
    frames = [random_frame(rng, 240, 320) for _ in range(9)]
    return random_network("nce_plus_tiny", crop_size=192), frames, [140.0, 100.0, 24.0, 20.0]


def _track(loaded, frames, init, **params):
    params = DiMPParams(train_setting="nce_plus_tiny", target_not_found_threshold=-1.0, **params)
    tracker = DiMPTracker(loaded.net, loaded.geometry, params)
    tracker.initialize(frames[0], init)
    boxes, refine_boxes = [], []
    for frame in frames[1:]:
        boxes.append(tracker.track(frame))
        refine_boxes.append(tracker.debug_info["refine_boxes"].clone())
    return tracker, np.stack(boxes), torch.stack(refine_boxes)


def test_graphed_path_is_the_eager_refinement_on_the_whole_maps(scene, monkeypatch):
    loaded, frames, init = scene
    # refine_window is ignored on the graphed path: it scores on the whole maps, as refine_window=None does
    graphed, boxes, candidates = _track(loaded, frames, init, cuda_graph=True, refine_window=0.6)
    # on a CPU the eager path pools with the C++ kernel, over each bin's cells only (rounding apart, the same
    # sums); the graph's data flow mirrors CUDA's, with PyTorch products over the whole maps
    _, kernel_boxes, _ = _track(loaded, frames, init, cuda_graph=False, refine_window=None)
    whole_map_products(monkeypatch)
    _, eager_boxes, eager_candidates = _track(loaded, frames, init, cuda_graph=False, refine_window=None)
    _, window_boxes, _ = _track(loaded, frames, init, cuda_graph=False, refine_window=0.3)
    assert graphed.graphed and graphed._refine_graph is not None and not graphed._refine_graph.captured
    np.testing.assert_array_equal(boxes, eager_boxes)
    torch.testing.assert_close(candidates, eager_candidates, rtol=0, atol=0)
    np.testing.assert_allclose(kernel_boxes, eager_boxes, rtol=1e-5)
    # the comparison can fail: a different refinement gives other boxes
    assert not np.array_equal(window_boxes, eager_boxes)


def test_graphed_path_reads_nothing_on_the_host_but_the_output_box(scene):
    loaded, frames, init = scene
    params = DiMPParams(train_setting="nce_plus_tiny", cuda_graph=True, sync_free=True)
    tracker = DiMPTracker(loaded.net, loaded.geometry, params)
    tracker.initialize(frames[0], init)
    for frame in frames[1:4]:
        with HostReads() as reads:
            tracker.track(frame)
        assert reads.names == ["cpu", "numpy"] and reads.uploads == []


def test_cuda_graph_is_off_on_a_cpu_by_default_and_validated():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    params = DiMPParams(train_setting="nce_plus_tiny")
    assert not DiMPTracker(loaded.net, loaded.geometry, params).graphed
    off = dataclasses.replace(params, cuda_graph=True, refine=False)
    assert not DiMPTracker(loaded.net, loaded.geometry, off).graphed  # nothing to replay
    # the resolution the tracker and the speed benchmark share
    assert params.refines_in_graph("cuda") and not params.refines_in_graph("cpu")
    assert not dataclasses.replace(params, cuda_graph=False).refines_in_graph("cuda")
    assert dataclasses.replace(params, cuda_graph=True).refines_in_graph("cpu")
    assert not off.refines_in_graph("cuda")
    with pytest.raises(ValueError, match="cuda_graph"):
        DiMPParams(train_setting="nce_plus_tiny", cuda_graph="auto")


@needs_cuda
def test_cuda_graph_replays_match_eager_calls():
    device = torch.device("cuda")
    first = [
        torch.randn(5, 3, device=device),
        torch.randn(3, 2, device=device),
        torch.randn(2, device=device),
    ]
    graphed = GraphedFunction(_affine, first)
    assert graphed.captured
    for _ in range(3):
        inputs = [torch.randn_like(t) for t in first]
        for got, want in zip(graphed(*inputs), _affine(*inputs), strict=True):
            torch.testing.assert_close(got, want)


@needs_cuda
def test_a_function_that_cannot_be_recorded_falls_back_to_eager_with_a_warning():
    def reads_the_host(x):
        return (x * float(x.sum()),)  # a host read: not allowed while recording

    x = torch.ones(3, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graphed = GraphedFunction(reads_the_host, [x])
    assert not graphed.captured
    assert any("recording a CUDA graph of reads_the_host failed" in str(w.message) for w in caught)
    torch.testing.assert_close(graphed(2 * x)[0], torch.full((3,), 12.0, device="cuda"))


@needs_cuda
def test_cuda_tracker_with_the_graph_gives_the_eager_boxes(scene):
    _, frames, init = scene
    loaded = random_network("nce_plus_tiny", "cuda", crop_size=192)
    graphed, boxes, candidates = _track(loaded, frames, init, cuda_graph=True)
    _, eager_boxes, eager_candidates = _track(loaded, frames, init, cuda_graph=False, refine_window=None)
    assert graphed._refine_graph is not None and graphed._refine_graph.captured
    np.testing.assert_allclose(boxes, eager_boxes, rtol=0, atol=1e-3)
    torch.testing.assert_close(candidates, eager_candidates, rtol=0, atol=1e-3)
