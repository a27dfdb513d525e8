"""The DiMP tracker against pytracking's own tracker (``tests/golden/tracker_*.npz``).

The golden numbers come from ``scripts/pytracking_golden.py tracker``: pytracking's DiMP tracker with its
``super_dimp`` / ``dimp50`` / ``prdimp50`` parameter files, on the CPU on a network of seeded weights, over two clips
(``tests/golden/clips.py``). Here the same weights are written in pytracking's file format, converted with
``ltr.admin.import_pytracking`` and loaded as a user would (BatchNorm folded), and this toolkit's tracker runs
the same clips with the same random draws.

Single steps: before each frame the tracker is given the reference's state (position, size, scale, last
refined position); its filter and memory are its own. So every frame checks one step of every rule (crop,
scores, localisation state, refinement candidates and result, box, memory weights, filter updates) from the
reference's state. Tolerances: the network's outputs agree to float32 rounding (about 1e-6 relative; folding
BatchNorm into the convolutions and the order of sums move them by that much). The filter, updated on the
tracker's own memory, drifts by a few 1e-6 relative over the hard-negative updates, and the scores, sums with
cancellation, by up to 2e-4 of the map's range (measured): 5e-4 is allowed. Refined boxes agreed to 1e-4
pixels; 1e-3 is allowed.

Whole sequences: the tracker runs free; its boxes must agree frame by frame to 0.01 pixels (random weights
give chaotic score maps, so a long sequence may diverge at a near-tie; these clips are short).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from ltr.admin.import_pytracking import convert
from pytracking.parameter.dimp import get_parameters
from pytracking.tracker.dimp import DiMPTracker, load_network
from pytracking.tracker.dimp.localize import STATES
from tests.golden.clips import photo_clip, synthetic_clip
from tests.golden.pytracking_format import (
    DIMP50_KWDS,
    PRDIMP50_KWDS,
    SUPER_DIMP_KWDS,
    write_pytracking_checkpoint,
)
from tests.golden.seeded import seeded_state_dict

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
KWDS = {"dimp50": DIMP50_KWDS, "super_dimp": SUPER_DIMP_KWDS, "prdimp50": PRDIMP50_KWDS}
FUNCTIONS = {"dimp50": "dimpnet50", "super_dimp": "dimpnet50", "prdimp50": "klcedimpnet50"}
REFERENCE_STATES = ("not_found", "uncertain", "hard_negative", "normal")


def golden(preset: str) -> dict[str, np.ndarray]:
    with np.load(GOLDEN / f"tracker_{preset}.npz") as data:
        return {k: data[k] for k in data.files}


_CACHE: dict[str, tuple] = {}


def tracker_for(preset: str, tmp_path_factory) -> tuple[DiMPTracker, dict[str, np.ndarray]]:
    if preset not in _CACHE:
        g = golden(preset)
        shapes = [
            (str(k), tuple(int(v) for v in s[:n])) for k, s, n in zip(g["keys"], g["shapes"], g["ndims"])
        ]
        state = seeded_state_dict(int(g["seed"]), shapes)
        folder = tmp_path_factory.mktemp(preset)
        src = write_pytracking_checkpoint(
            folder / f"{preset}.pth.tar", state, KWDS[preset], fun_name=FUNCTIONS[preset]
        )
        loaded = load_network(convert(src, folder / "converted.pth.tar", preset))
        _CACHE[preset] = (loaded, g)
    loaded, g = _CACHE[preset]
    params = get_parameters(preset)
    # the golden file records a not-found threshold where it differs from the parameter file
    threshold = float(g.get("target_not_found_threshold", params.target_not_found_threshold))
    params = dataclasses.replace(params, seed=int(g["seed"]), target_not_found_threshold=threshold)
    return DiMPTracker(loaded.net, loaded.geometry, params), g


def started(preset: str, name: str, tmp_path_factory) -> tuple[DiMPTracker, dict[str, np.ndarray], str, list]:
    """A tracker of ``preset`` initialised on clip ``name``'s first frame, the golden arrays, their key
    prefix and the clip's frames."""
    tracker, g = tracker_for(preset, tmp_path_factory)
    p = f"{name}/"
    make = synthetic_clip if name == "synthetic" else photo_clip
    frames, init = make(g[p + "box"].shape[0] + 1)
    tracker.initialize(frames[0], init)
    return tracker, g, p, frames


def _state(tracker: DiMPTracker) -> int:
    return REFERENCE_STATES.index(tracker.debug_info["state"])


SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("preset", "name"),
    [
        ("super_dimp", "synthetic"),
        ("super_dimp", "photo"),
        ("dimp50", "photo"),
        ("prdimp50", "photo"),
        pytest.param("dimp50", "synthetic", marks=SLOW),
        pytest.param("prdimp50", "synthetic", marks=SLOW),
    ],
)
def test_single_steps_from_the_references_state(preset, name, tmp_path_factory):
    tracker, g, p, frames = started(preset, name, tmp_path_factory)
    _, boxes, weights = tracker.memory.filled()
    np.testing.assert_allclose(boxes.numpy(), g[p + "init_boxes"], rtol=0, atol=1e-4)
    for ours, key in zip(tracker.modulation, ("modulation2", "modulation3")):
        np.testing.assert_allclose(ours.numpy().reshape(-1), g[p + key].reshape(-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(tracker.filter.numpy(), g[p + "init_filter"], rtol=1e-3, atol=1e-5)
    for i, frame in enumerate(frames[1:]):
        where = f"{preset} {name} frame {i + 1}"
        tracker.pos = torch.tensor(g[p + "pre_pos"][i], dtype=torch.float32)
        tracker.target_sz = torch.tensor(g[p + "pre_sz"][i], dtype=torch.float32)
        tracker.target_scale = torch.tensor(g[p + "pre_scale"][i], dtype=torch.float32)
        pos_refined = g[p + "pre_pos_iounet"][i]
        tracker._pos_refined = (
            None if np.isnan(pos_refined).any() else torch.tensor(pos_refined, dtype=torch.float32)
        )
        box = tracker.track(frame)
        info = tracker.debug_info
        np.testing.assert_array_equal(info["sample_coords"].numpy(), g[p + "coords"][i], err_msg=where)
        want_scores = g[p + "scores"][i]
        span = float(want_scores.max() - want_scores.min())
        np.testing.assert_allclose(
            info["scores"].numpy(), want_scores, rtol=0, atol=5e-4 * span, err_msg=where
        )
        assert _state(tracker) == int(g[p + "state"][i]), where
        if not np.isnan(g[p + "refine_boxes"][i]).any():
            assert info["refine_boxes"] is not None, where
        np.testing.assert_allclose(box, g[p + "box"][i], rtol=0, atol=1e-3, err_msg=where)
        _, _, weights = tracker.memory.filled()
        want_w = g[p + "weights"][i][: weights.shape[0]]
        np.testing.assert_allclose(weights.numpy(), want_w, rtol=1e-5, atol=1e-7, err_msg=where)
        np.testing.assert_allclose(
            float(tracker.filter.abs().sum()), g[p + "filter_sum"][i], rtol=1e-4, err_msg=where
        )
    np.testing.assert_allclose(tracker.filter.numpy(), g[p + "final_filter"], rtol=1e-3, atol=1e-4)
    assert {STATES[REFERENCE_STATES.index(STATES[k])] for k in range(4)} == set(REFERENCE_STATES)


@pytest.mark.parametrize(
    ("preset", "name"),
    [
        ("super_dimp", "photo"),
        pytest.param("super_dimp", "synthetic", marks=SLOW),
        pytest.param("dimp50", "synthetic", marks=SLOW),
        pytest.param("dimp50", "photo", marks=SLOW),
        pytest.param("prdimp50", "photo", marks=SLOW),
        pytest.param("prdimp50", "synthetic", marks=SLOW),
    ],
)
def test_whole_sequences_track_as_the_reference(preset, name, tmp_path_factory):
    tracker, g, p, frames = started(preset, name, tmp_path_factory)
    for i, frame in enumerate(frames[1:]):
        box = tracker.track(frame)
        where = f"{preset} {name} frame {i + 1}"
        assert _state(tracker) == int(g[p + "state"][i]), where
        np.testing.assert_allclose(box, g[p + "box"][i], rtol=0, atol=1e-2, err_msg=where)
