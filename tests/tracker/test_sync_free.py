"""The sync-free tracker: one host read per frame (the output box), no blocking upload, and the same boxes as
the branching path."""

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.localize import HARD_NEGATIVE, NORMAL, NOT_FOUND, UNCERTAIN
from pytracking.tracker.host_reads import HostReads
from tests.tracker.helpers import random_frame, whole_map_products

OUTPUT_READ = ["cpu", "numpy"]  # self._box().double().cpu().numpy()


def test_host_reads_records_the_reading_calls_only():
    t = torch.tensor([1.5, -2.0])
    with HostReads() as reads:
        _ = (t * 2 + 1).sum(0)  # device work: not a read
        _ = t[0].item(), t.tolist(), int(t[0]), float(t[1]), t.numpy(), t[t > 0], torch.nonzero(t)
        if t[0] > 0:
            pass
        _ = [0, 1, 2][torch.tensor(1)]
        _ = t.index_fill(0, torch.tensor([1]), 2.0)  # a host value: not a read
        _ = t.index_fill(0, torch.tensor([1]), torch.tensor(2.0))  # the kernel reads the tensor's value
    assert reads.names == [
        "item",
        "tolist",
        "__int__",
        "__float__",
        "numpy",
        "__getitem__",
        "nonzero",
        "__bool__",
        "__index__",
        "index_fill",
    ]
    assert reads.uploads == []


def test_host_reads_records_blocking_uploads():
    t = torch.ones(2)
    with HostReads() as reads:
        torch.tensor([1.0], device="cpu")
        torch.as_tensor([1.0, 2.0], device="cpu")
        torch.as_tensor(t, device="cpu")  # already a tensor: no copy from host data
        t.new_tensor([3.0])
        t.to("cpu")
        t.to(torch.float64)  # a dtype change: not a device copy
        t.to("cpu", non_blocking=True)
        torch.tensor([1.0])  # a host tensor
        t[1] = 2.0  # a host number copied in
        t[0] = t[1]  # device to device
    assert reads.uploads == ["tensor", "as_tensor", "new_tensor", "to", "__setitem__"]
    assert reads.names == []


def _run(loaded, frames, init, **params):
    tracker = DiMPTracker(loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", **params))
    tracker.initialize(frames[0], init)
    boxes, states, reads = [], [], []
    for frame in frames[1:]:
        with HostReads() as r:
            boxes.append(tracker.track(frame))
        reads.append(r.names + [f"upload:{name}" for name in r.uploads])
        states.append(int(tracker.debug_info["state"]))
    return np.stack(boxes), states, reads


@pytest.fixture(scope="module")
def scene():
    rng = np.random.default_rng(11)
    frames = [random_frame(rng, 240, 320) for _ in range(13)]
    return random_network("nce_plus_tiny", crop_size=192), frames, [140.0, 100.0, 24.0, 20.0]


# random weights score about 0.01-0.05: these thresholds give every state (see the assertion on the states)
THRESHOLDS = [
    {"target_not_found_threshold": 0.02, "distractor_threshold": 1.0, "hard_negative_threshold": 0.8},
    {"target_not_found_threshold": 0.0, "distractor_threshold": 0.8, "update_scale_when_uncertain": False},
    # the motion prior on the scores is device arithmetic too
    {"target_not_found_threshold": 0.02, "distractor_threshold": 0.8, "score_window": 1.0},
]


def test_sync_free_frames_read_only_the_output_box_and_match_the_branching_path(scene, monkeypatch):
    loaded, frames, init = scene
    whole_map_products(monkeypatch)  # both paths pool the same way: the same sums, no per-call host read
    seen, window_reads = set(), 0
    for thresholds in THRESHOLDS:
        common = {"train_skipping": 3, **thresholds}  # filter optimisations on several frames
        free, free_states, free_reads = _run(loaded, frames, init, sync_free=True, **common)
        branch, states, branch_reads = _run(loaded, frames, init, sync_free=False, **common)
        assert free_states == states
        seen.update(states)
        assert all(r == OUTPUT_READ for r in free_reads), free_reads
        # the state, once; on frames that refine, also the window's corner, and the window's origin and
        # bounds are made from host numbers
        windowed = ["__int__", "tolist", *OUTPUT_READ, "upload:tensor", "upload:tensor"]
        assert all(r in (["__int__", *OUTPUT_READ], windowed) for r in branch_reads), branch_reads
        window_reads += sum(r[1] == "tolist" for r in branch_reads)
        # masking instead of branching does the same arithmetic on the kept values
        np.testing.assert_array_equal(free, branch)
    assert seen == {NOT_FOUND, UNCERTAIN, HARD_NEGATIVE, NORMAL}
    assert window_reads > 0


def test_sync_free_is_the_default_on_cuda_only():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    assert not DiMPTracker(loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny")).sync_free
    params = DiMPParams(train_setting="nce_plus_tiny", sync_free=True)
    assert DiMPTracker(loaded.net, loaded.geometry, params).sync_free
    with pytest.raises(ValueError, match="sync_free"):
        DiMPParams(train_setting="nce_plus_tiny", sync_free="yes")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_reports_one_synchronisation_per_frame(scene):
    loaded, frames, init = scene
    net = random_network("nce_plus_tiny", "cuda", crop_size=192)
    tracker = DiMPTracker(net.net, net.geometry, DiMPParams(train_setting="nce_plus_tiny"))
    tracker.initialize(frames[0], init)
    tracker.track(frames[1])
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with pytest.warns(UserWarning) as record:
            tracker.track(frames[2])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [f"{w.filename}:{w.lineno}" for w in record if "synchroniz" in str(w.message)]
    assert len(syncs) == 1, syncs


def test_sync_free_on_a_cpu_reads_only_the_output_box_with_the_cpu_kernels_available(scene):
    """Without the tests' whole-map helper: the sync-free path leaves the CPU kernels and the cell restriction
    (which read values on the host) to the branching path."""
    loaded, frames, init = scene
    _, states, reads = _run(loaded, frames[:6], init, sync_free=True, target_not_found_threshold=-1.0)
    assert NOT_FOUND not in states  # every frame refined
    assert all(r == OUTPUT_READ for r in reads), reads


def test_the_kernel_is_built_at_construction_only_for_trackers_that_use_it(monkeypatch):
    from ltr.ops import box_pool_kernel

    loaded = random_network("nce_plus_tiny", crop_size=64)
    built = []
    monkeypatch.setattr(box_pool_kernel, "available", lambda: built.append(True) or True)
    for sync_free in (True, False):
        DiMPTracker(
            loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", sync_free=sync_free)
        )
    assert built == [True]  # the branching tracker's, not the sync-free one's
