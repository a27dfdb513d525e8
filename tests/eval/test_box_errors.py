"""Per-frame box errors (eval/box_errors.py) on boxes whose errors are known by construction, and through
run_eval.py --box-errors on a generated folder dataset."""

import math

import numpy as np
import pandas as pd
import pytest

from eval.box_errors import SUMMARY_COLUMNS, first_lost_frame, frame_box_errors, summarize, tracker_means
from eval.eval_cli import main
from eval.evaluation import GroundTruth
from tests.eval.test_run_eval import folder_argv, setup  # noqa: F401 (fixture)

GT = [10.0, 10.0, 20.0, 10.0]  # centre (20, 15), size sqrt(200), aspect 2


def test_size_aspect_and_centre_errors_of_known_boxes():
    gt = GroundTruth("s", np.array([GT] * 6))
    pred = np.array(
        [
            [0.0, 0.0, 1.0, 1.0],  # frame 1: initialisation, left out
            GT,  # exact
            [0.0, 5.0, 40.0, 20.0],  # twice the size, same centre
            [10.0, 10.0, 40.0, 10.0],  # twice as wide, centre 10 px to the right
            [np.nan] * 4,  # no prediction
            [10.0, 10.0, 0.0, 10.0],  # zero width
        ]
    )
    e = frame_box_errors(pred, gt)
    assert e["frame"].tolist() == [2, 3, 4, 5, 6]
    np.testing.assert_allclose(e["iou"], [1.0, 0.25, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(e["log_size"][:3], [0.0, math.log(2), 0.5 * math.log(2)])
    np.testing.assert_allclose(e["log_aspect"][:3], [0.0, 0.0, math.log(2)])
    np.testing.assert_allclose(e["aspect"][:3], [2.0, 2.0, 4.0])
    np.testing.assert_allclose(e["gt_aspect"], 2.0)
    np.testing.assert_allclose(e["norm_center"][:3], [0.0, 0.0, 10 / math.sqrt(200)])
    assert e[["log_size", "log_aspect", "aspect", "norm_center"]].iloc[3:].isna().all().all()


def test_unknown_and_absent_ground_truth_frames_are_left_out():
    boxes = np.array([GT, GT, [np.nan] * 4, [1.0, 1.0, 0.0, 5.0], GT, GT])
    visible = np.array([True, True, True, True, False, True])
    e = frame_box_errors(np.array([GT] * 8), GroundTruth("s", boxes, visible=visible))
    assert e["frame"].tolist() == [2, 6]  # shorter of prediction and ground truth; frame 1 never counted


def test_first_lost_frame_needs_a_long_enough_run():
    frames = np.arange(2, 14)
    iou = np.array([0.8, 0.1, 0.2, 0.9, 0.3, 0.0, 0.1, 0.5, 0.0, 0.0, 0.0, 0.0])
    assert first_lost_frame(frames, iou, 0.3, 3) == 6  # 0.3 counts as lost (at or below)
    assert first_lost_frame(frames, iou, 0.3, 4) == 10
    assert first_lost_frame(frames, iou, 0.3, 5) is None


def test_summary_takes_box_errors_over_found_frames_only():
    errors = pd.DataFrame(
        {
            "frame": [2, 3, 4, 5],
            "iou": [0.9, 0.5, 0.1, 0.0],
            "log_size": [0.2, -0.4, 3.0, np.nan],
            "log_aspect": [0.1, -0.3, 2.0, np.nan],
            "aspect": [1.0, 1.0, 1.0, np.nan],
            "gt_aspect": [1.0, 1.0, 1.0, 1.0],
            "norm_center": [0.1, 0.3, 5.0, np.nan],
        }
    )
    s = summarize(errors, found_iou=0.3, lost_frames=2)
    assert s["frames"] == 4 and s["found"] == 0.5 and s["lost_at"] == 4
    assert s["mean_iou"] == pytest.approx(0.375)
    assert s["log_size"] == pytest.approx(-0.1) and s["abs_log_size"] == pytest.approx(0.3)
    assert s["abs_log_aspect"] == pytest.approx(0.2) and s["norm_center"] == pytest.approx(0.2)


def test_tracker_means_count_lost_sequences_per_run():
    rows = [
        {"tracker": "t", "run": run, "sequence": seq, **dict.fromkeys(SUMMARY_COLUMNS, 0.5), "lost_at": lost}
        for run, seq, lost in ((0, "a", 7), (0, "b", None), (1, "a", 9), (1, "b", 30))
    ]
    means = tracker_means(pd.DataFrame(rows).astype({"lost_at": "Int64"}))
    assert means.loc["t", "lost"] == 1.5 and means.loc["t", "mean_iou"] == 0.5


def test_run_eval_writes_box_error_tables(setup, capsys):  # noqa: F811
    out = setup / "out"
    argv = folder_argv(setup, ["dimp/good", "dimp/bad"], out, "--no-plots", "--box-errors", "--format", "csv")
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # good: every frame exact; seqA's frame 4 is absent and left out. bad: seqB frames 2-4 far away
    assert "dimp/good,1.000,1.000,0.000,0.000,0.000,0.000,0.000" in printed
    per_sequence = pd.read_csv(out / "box_errors.csv")
    good = per_sequence[per_sequence["tracker"] == "dimp/good"]
    assert good["run"].tolist() == [0, 0, 1, 1] and good["frames"].tolist() == [3, 3, 3, 3]
    bad = per_sequence[per_sequence["tracker"] == "dimp/bad"].set_index("sequence")
    assert bad.loc["seqB", "mean_iou"] == 0 and bad.loc["seqB", "found"] == 0
    assert bad.loc["seqA", "mean_iou"] == 1 and pd.isna(bad.loc["seqB", "lost_at"])  # 3 frames < 10
    per_frame = pd.read_csv(out / "box_errors_per_frame.csv")
    assert len(per_frame) == 4 * 3 + 2 * 3
    far = per_frame[(per_frame["tracker"] == "dimp/bad") & (per_frame["sequence"] == "seqB")]
    assert far["frame"].tolist() == [2, 3, 4]
    np.testing.assert_allclose(far["norm_center"], 100 * math.sqrt(2) / 10, atol=1e-4)  # 4 decimals
