"""Trackers in lockstep (:func:`track_frames`): each sequence's boxes are its boxes tracked alone, with
sequences of different lengths and frame sizes starting at different steps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.frames import FrameSizeError
from pytracking.tracker.dimp.lockstep import _optimise, track_frames
from tests.tracker.helpers import random_frame

OPENED = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}
#: frames are smooth images (a textured square over a blurred background), so states and boxes vary
TOLERANCE = 1e-3  # pixels: float32 rounding of batched convolutions, carried through a few frames
ON_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def smooth_video(seed: int, frames: int, height: int, width: int) -> tuple[list[np.ndarray], list[float]]:
    """A textured square moving over a smooth background; frames (H, W, 3) uint8 and the first box xywh."""
    rng = np.random.default_rng(seed)
    background = rng.integers(0, 256, (height // 8 + 2, width // 8 + 2, 3)).astype(np.float32)
    background = np.kron(background, np.ones((8, 8, 1), np.float32))[:height, :width]
    patch = rng.integers(0, 256, (14, 14, 3)).astype(np.float32)
    video, x, y = [], width / 3, height / 3
    for _ in range(frames):
        frame = background.copy()
        xi, yi = int(x), int(y)
        frame[yi : yi + 14, xi : xi + 14] = patch
        video.append(frame.clip(0, 255).astype(np.uint8))
        x += rng.uniform(-2, 3)
        y += rng.uniform(-2, 2)
    return video, [width / 3, height / 3, 14.0, 14.0]


#: (seed, frames, height, width, step at which the sequence joins)
SEQUENCES = [
    (0, 7, 90, 120, 0),
    (1, 4, 72, 96, 0),
    (2, 6, 100, 100, 1),
    (3, 3, 90, 120, 3),
    (4, 5, 64, 80, 2),
]


def lockstep_videos() -> list[tuple[list[np.ndarray], list[float], int]]:
    """(frames, first box, joining step) of every sequence of :data:`SEQUENCES`."""
    return [(*smooth_video(seed, n, h, w), join) for seed, n, h, w, join in SEQUENCES]


def tracker(loaded, params: DiMPParams) -> DiMPTracker:
    return DiMPTracker(loaded.net, loaded.geometry, params)


def alone(loaded, params, video, init):
    t = tracker(loaded, params)
    t.initialize(video[0], init)
    out = []
    for frame in video[1:]:
        box = t.track(frame)
        out.append((box, t.debug_info["state"]))
    return out


def against_alone(loaded, params, videos, batched) -> tuple[set[str], float]:
    """Assert that each sequence's ``batched`` (box, state) results have the states and, within
    :data:`TOLERANCE`, the boxes it gets tracked alone with ``params``; returns the states seen and the
    largest box difference (px)."""
    states: set[str] = set()
    worst = 0.0
    for (video, init, _), together in zip(videos, batched, strict=True):
        single = alone(loaded, params, video, init)
        assert [s for _, s in together] == [s for _, s in single]
        boxes, want = np.stack([b for b, _ in together]), np.stack([b for b, _ in single])
        np.testing.assert_allclose(boxes, want, rtol=0, atol=TOLERANCE)
        worst = max(worst, float(np.abs(boxes - want).max()))
        states.update(s for _, s in single)
    return states, worst


def threshold_between_first_peaks(loaded, videos) -> float:
    """Halfway between the middle two of the ``videos``' score peaks on their first tracked frame (before any
    not-found decision), so a not-found threshold there leaves some sequences found and some not, none of
    them at the threshold itself (where the float rounding of a batch could flip the decision)."""
    peaks = []
    for video, init, _ in videos:
        t = tracker(loaded, DiMPParams(train_setting="nce_plus_tiny", **OPENED))
        t.initialize(video[0], init)
        t.track(video[1])
        peaks.append(float(t.debug_info["scores"].max()))
    peaks.sort()
    k = (len(peaks) - 1) // 2
    return (peaks[k] + peaks[k + 1]) / 2


def in_lockstep(loaded, params, videos, pad_to=None, groups=1):
    """Every sequence joins at its step; each step advances all joined, unfinished sequences by one frame
    (``pad_to``, ``groups``: those of :func:`track_frames`)."""
    trackers = [tracker(loaded, params) for _ in videos]
    results = [[] for _ in videos]
    next_frame = [1] * len(videos)
    step = 0
    while any(n < len(v[0]) for n, v in zip(next_frame, videos)):
        for i, (video, init, join) in enumerate(videos):
            if join == step:
                trackers[i].initialize(video[0], init)
        busy = [i for i, (video, _, join) in enumerate(videos) if join <= step and next_frame[i] < len(video)]
        boxes = track_frames(
            [trackers[i] for i in busy],
            [videos[i][0][next_frame[i]] for i in busy],
            pad_to=pad_to,
            groups=groups,
        )
        for i, box in zip(busy, boxes):
            results[i].append((box, trackers[i].debug_info["state"]))
            next_frame[i] += 1
        step += 1
    return results


@pytest.mark.parametrize(
    "options",
    [
        # a not-found threshold inside this random network's score range (see the test): some frames are not
        # found (and not refined) while others in the same step are
        {"target_not_found_threshold": "between"},
        OPENED,
        {**OPENED, "refine": False},
        {**OPENED, "refine_mode": "s1", "refine_decay": 0.5},
        {**OPENED, "refine_space": "default"},
        {**OPENED, "score_preprocess": "softmax"},
        # the filters of all trackers optimised every frame (and so together, from memories of other fills)
        {**OPENED, "train_skipping": 1},
        {**OPENED, "train_skipping": 1, "score_preprocess": "softmax", "optimizer": "newton_kl"},
        # the refined size blended into the state (our options), for all refined trackers at once
        {**OPENED, "scale_learning_rate": 0.5},
        {
            **OPENED,
            "scale_learning_rate": 0.7,
            "aspect_learning_rate": 0.3,
            "update_scale_when_uncertain": False,
        },
    ],
    ids=[
        "states",
        "opened",
        "norefine",
        "s1",
        "default_space",
        "softmax",
        "optimised",
        "optimised_kl",
        "scale_rate",
        "aspect_rate",
    ],
)
def test_each_sequence_gets_its_boxes_tracked_alone(options):
    options = dict(options)
    loaded = network(options.pop("optimizer", "steepest_descent_gn"))
    videos = lockstep_videos()
    some_not_found = options.get("target_not_found_threshold") == "between"
    if some_not_found:
        options = {**options, "target_not_found_threshold": threshold_between_first_peaks(loaded, videos)}
    params = DiMPParams(train_setting="nce_plus_tiny", **options)
    batched = in_lockstep(loaded, params, videos)
    states, _ = against_alone(loaded, params, videos, batched)
    if some_not_found:
        assert "not_found" in states and len(states) >= 2, states  # the subset path ran
    all_boxes = np.concatenate([np.stack([b for b, _ in r]) for r in batched])
    assert np.isfinite(all_boxes).all() and np.ptp(all_boxes[:, 0]) > 5  # the boxes differ per sequence


def network(optimizer: str = "steepest_descent_gn"):
    """The demo's network at 64 pixels, random weights, with DiMP's or PrDiMP's filter optimizer."""
    return random_network("nce_plus_tiny", crop_size=64, net_fields={"filter_optimizer": optimizer})


@pytest.mark.parametrize("optimizer", ["steepest_descent_gn", "newton_kl"])
def test_filters_optimised_together_are_each_filter_optimised_alone(optimizer):
    """One optimizer call for trackers whose memories hold different numbers of samples (the fuller
    memories' extra slots enter the others' as zero-weight padding) gives each tracker its own filter."""
    loaded = network(optimizer)
    params = DiMPParams(train_setting="nce_plus_tiny", train_skipping=1000, **OPENED)
    trackers = []
    for k, (video, init, _) in enumerate(lockstep_videos()[:3]):
        t = tracker(loaded, params)
        t.initialize(video[0], init)
        for frame in video[1 : 2 + k]:
            t.track(frame)
        trackers.append(t)
    assert len({t.memory.count for t in trackers}) == 3
    start = [t.filter for t in trackers]
    alone = []
    for t, filt in zip(trackers, start, strict=True):
        _optimise([t], 2)
        alone.append(t.filter)
        t.filter = filt
    _optimise(trackers, 2)
    for t, want, filt in zip(trackers, alone, start, strict=True):
        assert (want - filt).abs().max() > 1e-3 * filt.abs().max()  # the steps moved the filter
        torch.testing.assert_close(t.filter, want, rtol=1e-5, atol=1e-6 * float(want.abs().max()))


def test_a_frame_of_another_size_is_refused_before_any_tracker_moves():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    params = DiMPParams(train_setting="nce_plus_tiny", **OPENED)
    rng = np.random.default_rng(0)
    a, b = tracker(loaded, params), tracker(loaded, params)
    a.initialize(random_frame(rng, 60, 80), [10.0, 10.0, 12.0, 12.0])
    b.initialize(random_frame(rng, 60, 80), [20.0, 20.0, 12.0, 12.0])
    before = (a.pos.clone(), a.frame_num, b.pos.clone(), b.frame_num)
    with pytest.raises(FrameSizeError, match="frame 1 is 70x60 pixels"):
        track_frames([a, b], [random_frame(rng, 60, 80), random_frame(rng, 60, 70)])
    assert torch.equal(a.pos, before[0]) and a.frame_num == before[1] and b.frame_num == before[3]


def test_trackers_of_other_parameters_or_networks_are_not_batched():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    other = random_network("nce_plus_tiny", crop_size=64)
    rng = np.random.default_rng(1)
    frame = random_frame(rng, 60, 80)
    pairs = [
        (DiMPParams(train_setting="nce_plus_tiny"), DiMPParams(train_setting="nce_plus_tiny", refine=False)),
    ]
    for pa, pb in pairs:
        a, b = tracker(loaded, pa), tracker(loaded, pb)
        for t in (a, b):
            t.initialize(frame, [10.0, 10.0, 12.0, 12.0])
        with pytest.raises(ValueError, match="share one network, geometry and parameters"):
            track_frames([a, b], [frame, frame])
    a = tracker(loaded, DiMPParams(train_setting="nce_plus_tiny"))
    b = tracker(other, DiMPParams(train_setting="nce_plus_tiny"))
    with pytest.raises(ValueError, match="share one network"):
        track_frames([a, b], [frame, frame])


@pytest.mark.parametrize("groups", [2, 3, 8])
@pytest.mark.parametrize("options", ["between", "opened"])
def test_groups_interleaved_give_each_sequence_its_boxes_tracked_alone(options, groups):
    """``groups``: the trackers of a step split into interleaved batches (8: more groups than trackers)."""
    loaded = random_network("nce_plus_tiny", crop_size=64)
    videos = lockstep_videos()
    if options == "between":
        params = DiMPParams(
            train_setting="nce_plus_tiny",
            target_not_found_threshold=threshold_between_first_peaks(loaded, videos),
        )
    else:
        params = DiMPParams(train_setting="nce_plus_tiny", **OPENED)
    batched = in_lockstep(loaded, params, videos, groups=groups)
    states, _ = against_alone(loaded, params, videos, batched)
    if options == "between":  # some trackers of a group were refined while others were not
        assert "not_found" in states and len(states) >= 2, states
    else:
        assert "not_found" not in states


def test_groups_must_be_positive():
    loaded = random_network("nce_plus_tiny", crop_size=64)
    t = tracker(loaded, DiMPParams(train_setting="nce_plus_tiny"))
    video, init, _ = lockstep_videos()[0]
    t.initialize(video[0], init)
    with pytest.raises(ValueError, match="groups >= 1"):
        track_frames([t], [video[1]], groups=0)


@ON_CUDA
@pytest.mark.parametrize(("cuda_graph", "groups"), [(False, 1), (True, 1), (True, 2)])
def test_on_cuda_each_sequence_gets_its_boxes_tracked_alone(cuda_graph, groups):
    """The same on the GPU, where convolutions of other batch sizes take other algorithms: in full float32
    (the tracker's default, ``tf32=False``) the boxes agree as on the CPU. With ``cuda_graph`` the batched
    refinement is a replayed graph (padded to 2, 4, ... sequences as they join and end), against the eager
    tracker alone; with two groups, their steps interleaved on the device (and sharing the graphs)."""
    loaded = random_network("nce_plus_tiny", device="cuda", crop_size=64)
    params = DiMPParams(train_setting="nce_plus_tiny", **OPENED)
    videos = lockstep_videos()
    batched = in_lockstep(loaded, dataclasses.replace(params, cuda_graph=cuda_graph), videos, groups=groups)
    _, worst = against_alone(loaded, params, videos, batched)
    print(
        f"largest box difference, lockstep (cuda_graph={cuda_graph}, groups={groups}) against alone on CUDA: "
        f"{worst:.3g} px"
    )
    assert worst < TOLERANCE


@pytest.mark.parametrize("tf32", [False, True])
def test_the_networks_run_with_the_convolution_precision_of_the_parameters(tf32):
    """``tf32``: cuDNN's TF32 switch as the tracker's parameter says while its networks run (initialisation
    and tracking), and as it was afterwards."""
    loaded = random_network("nce_plus_tiny", crop_size=64)
    seen: list[bool] = []
    hook = loaded.net.backbone.register_forward_hook(lambda *_: seen.append(torch.backends.cudnn.allow_tf32))
    before = torch.backends.cudnn.allow_tf32
    try:
        t = tracker(loaded, DiMPParams(train_setting="nce_plus_tiny", tf32=tf32, **OPENED))
        video, init, _ = lockstep_videos()[0]
        t.initialize(video[0], init)
        track_frames([t], [video[1]])
    finally:
        hook.remove()
    assert len(seen) == 2 and set(seen) == {tf32}
    assert torch.backends.cudnn.allow_tf32 == before


@pytest.mark.parametrize(
    ("device", "cuda_graph", "step"),
    [
        ("cpu", False, None),
        ("cpu", False, 0.3),
        pytest.param("cuda", False, 0.3, marks=ON_CUDA),
        pytest.param("cuda", True, None, marks=ON_CUDA),
        pytest.param("cuda", True, 0.3, marks=ON_CUDA),
    ],
)
def test_box_windows_of_larger_crops_give_each_sequence_its_boxes_tracked_alone(
    monkeypatch, device, cuda_graph, step
):
    """256-pixel crops, where each image's box features are computed on a window of the maps (in lockstep of
    the batch's few window sizes, alone of its own size); with a large refinement step some images' boxes
    leave their windows and are refined again on the whole maps. On CUDA also with the lockstep refinement
    replayed as a graph (whose flags say which images' boxes left), against the eager tracker alone."""
    from pytracking.tracker.dimp.stages import TorchStages

    loaded = random_network("nce_plus_tiny", device=device, crop_size=256)
    refine = {} if step is None else {"refine_step": step}
    params = DiMPParams(train_setting="nce_plus_tiny", **OPENED, **refine)
    windows = {"cut": 0, "again": 0}
    modulated, ascend = TorchStages.modulated, TorchStages._ascend

    def counted_modulated(self, inputs, boxes):
        features, limits = modulated(self, inputs, boxes)
        if limits is not None:
            windows["cut"] += int(torch.isfinite(limits).any(dim=1).sum())
        return features, limits

    def counted_ascend(self, features, boxes, limits, options):
        refined, scores, held = ascend(self, features, boxes, limits, options)
        if held is not None:
            windows["again"] += int((~held).sum())
        return refined, scores, held

    monkeypatch.setattr(TorchStages, "modulated", counted_modulated)
    monkeypatch.setattr(TorchStages, "_ascend", counted_ascend)
    videos = lockstep_videos()
    batched = in_lockstep(loaded, dataclasses.replace(params, cuda_graph=cuda_graph), videos)
    _, worst = against_alone(loaded, params, videos, batched)
    print(
        f"largest box difference on {device} (cuda_graph={cuda_graph}, step={step}): {worst:.3g} px, {windows}"
    )
    assert windows["cut"] > 10  # of the 40 refinements (20 in lockstep, 20 alone), the rest on whole maps
    assert (windows["again"] > 0) == (step is not None)
