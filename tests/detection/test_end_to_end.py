"""End to end on a small synthetic set (slow: trains a detector and a head on CPU)."""

import json

import pytest

from ltr.admin.config import apply_overrides
from ltr.detection.run import run_setting
from ltr.train_settings.detection import SETTINGS


@pytest.mark.slow
def test_tiny_nce_plus_runs_and_zero_steps_keep_the_guided_nms_boxes(tmp_path):
    cfg = apply_overrides(
        SETTINGS["nce_plus_tiny"](),
        [
            "synthetic.num_train=24",
            "synthetic.num_val=6",
            "synthetic.num_test=6",
            "detector_iters=60",
            "iterations=30",
            "log_every=10",
            "tune_steps=false",
            "step_pos=0",
            "step_size=0",
        ],
    )
    payload = run_setting(cfg, setting="detection/test_tiny", workspace=tmp_path, log=lambda _: None)
    run = tmp_path / "checkpoints" / "detection" / "test_tiny"
    assert json.loads((run / "results.json").read_text())["metrics"] == payload["metrics"]
    assert (run / "head.pth").is_file() and (run / "results.md").is_file()
    # with zero step lengths refinement is the identity
    assert payload["metrics"]["refined"] == payload["metrics"]["guided_nms"]
    assert payload["history"][-1]["loss"] < payload["history"][0]["loss"]
    # the cached detector is reused by a second run (no retraining: same detector AP)
    again = run_setting(
        cfg, setting="detection/test_tiny", workspace=tmp_path, resume=True, log=lambda _: None
    )
    assert again["metrics"]["detector"] == payload["metrics"]["detector"]
