"""benchmarks/oracle_tracking.py's wrapper: the true position or size is given back after every frame, and
the tracker's next frame starts from it."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.tracker.helpers import random_frame, tiny_tracker

_SPEC = importlib.util.spec_from_file_location(
    "oracle_tracking", Path(__file__).resolve().parents[2] / "benchmarks" / "oracle_tracking.py"
)
oracle_tracking = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(oracle_tracking)


def _run(mode: str, truth: np.ndarray, frames: list[np.ndarray]):
    tracker = oracle_tracking.OracleTracker(tiny_tracker(), truth, mode)
    tracker.initialize(frames[0], truth[0])
    boxes, starts = [], []
    for frame in frames[1:]:
        boxes.append(tracker.track(frame))
        t = tracker.tracker
        starts.append(np.concatenate([t.pos.numpy(), t.target_sz.numpy()]))  # the next frame's start
    return np.array(boxes), np.array(starts)


@pytest.fixture
def sequence():
    rng = np.random.default_rng(0)
    frames = [random_frame(rng, 96, 128) for _ in range(5)]
    truth = np.array(
        [[40, 30, 24, 20], [44, 32, 26, 20], [np.nan] * 4, [50, 36, 30, 22], [52, 38, 30, 24]], float
    )
    return truth, frames


def test_none_is_the_plain_tracker(sequence):
    truth, frames = sequence
    boxes, _ = _run("none", truth, frames)
    plain = tiny_tracker()
    plain.initialize(frames[0], truth[0])
    np.testing.assert_array_equal(boxes, np.array([plain.track(f) for f in frames[1:]]))


def test_position_and_size_are_the_truth_after_each_known_frame(sequence):
    truth, frames = sequence
    known = [0, 2, 3]  # frame 3 (row 2 of the outputs) has no ground truth and stays as tracked
    centre = truth[1:, :2] + (truth[1:, 2:] - 1) / 2
    boxes, starts = _run("position", truth, frames)
    np.testing.assert_allclose((boxes[:, :2] + (boxes[:, 2:] - 1) / 2)[known], centre[known], atol=1e-4)
    np.testing.assert_allclose(starts[known, :2], centre[known][:, ::-1], atol=1e-4)  # (y, x)
    assert not np.allclose(boxes[known, 2:], truth[1:][known, 2:], atol=0.5)  # its own size
    boxes, starts = _run("size", truth, frames)
    np.testing.assert_allclose(boxes[known, 2:], truth[1:][known, 2:], atol=1e-4)
    np.testing.assert_allclose(starts[known, 2:], truth[1:][known, 3:1:-1], atol=1e-4)  # (h, w)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode must be one of"):
        oracle_tracking.OracleTracker(None, np.zeros((2, 4)), "centre")
