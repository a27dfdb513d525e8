"""Stats files and the visdom client: a real visdom server on loopback receives the trainer's curves."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from ltr.admin.ports import free_port
from ltr.admin.stats import VisdomPlotter, VisdomUnavailable, read_stats_json, stats_csv_text, write_stats
from ltr.trainers import VisdomHook


def test_csv_and_json_from_a_history(tmp_path):
    history = [
        {"epoch": 1, "phase": "train", "loss": 0.1 + 0.2, "lr/head": 1e-3},
        {"epoch": 1, "phase": "val", "loss": float("nan"), "iou": 0.5},
    ]
    text = stats_csv_text(history)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0] == "epoch,phase,iou,loss,lr/head"
    assert float(rows[0]["loss"]) == 0.1 + 0.2  # exact round trip
    assert rows[0]["iou"] == "" and rows[1]["lr/head"] == ""
    write_stats(tmp_path, history, {"setting": "a/b"})
    data = read_stats_json(tmp_path)
    assert data["meta"] == {"setting": "a/b"}
    assert data["history"][1]["loss"] is None  # NaN written as null: the file stays standard JSON
    assert data["history"][0] == history[0]
    assert (tmp_path / "stats.csv").read_text() == text
    (tmp_path / "stats.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"stats\.json:1: not valid JSON"):
        read_stats_json(tmp_path)


def test_no_visdom_server_is_a_clear_error():
    port = free_port()  # nothing listens there
    with pytest.raises(
        VisdomUnavailable, match=rf"no visdom server is running at http://127.0.0.1:{port}"
    ) as e:
        VisdomPlotter(env="test", port=port)
    assert f"python -m ltr.admin.visdom_server --port {port}" in str(e.value)


@pytest.fixture
def visdom_server(tmp_path):
    """A real visdom server on 127.0.0.1 (the project's offline starter; no browser assets needed)."""
    from ltr.admin.visdom_server import start_server

    server = start_server(free_port(), env_path=tmp_path / "visdom_env")
    try:
        yield server.port
    finally:
        server.close()


def test_trainer_curves_arrive_on_a_real_visdom_server(visdom_server, tmp_path):
    import torch

    from tests.trainers.toy import build

    torch.set_num_threads(1)
    trainer, _ = build(None, epochs=2, extra_hooks=[VisdomHook(port=visdom_server, env="ebm_test")])
    history = trainer.train()

    plotter = VisdomPlotter(env="ebm_test", port=visdom_server)
    vis = plotter.vis
    for curve in ("loss", "mae", "lr/body", "samples_per_s"):
        assert vis.win_exists(VisdomPlotter.window_id(curve), env="ebm_test") is True, curve
    assert vis.win_exists(VisdomPlotter.window_id("epoch"), env="ebm_test") is False
    data = json.loads(vis.get_window_data(VisdomPlotter.window_id("loss"), env="ebm_test"))
    traces = {t["name"]: t for t in data["content"]["data"]}
    assert set(traces) == {"train", "val"}
    assert traces["train"]["x"] == [1, 2]
    expected = [r["loss"] for r in history if r["phase"] == "train"]
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(traces["train"]["y"], expected, strict=True))
    assert traces["val"]["x"] == [2]  # validation every 2 epochs


def test_the_1d_study_posts_its_loss_curve_to_a_real_visdom_server(visdom_server):
    """``run_training.py regression_1d <setting> --visdom``: the trainer's VisdomHook posts one point per
    epoch in the setting's env, and with no server the run stops with the start command."""
    from ltr.regression_1d.single import build_trainer
    from ltr.train_settings.regression_1d import SETTINGS

    config = SETTINGS["nce_plus"]().replace(epochs=2, num_train=64, num_samples=16)
    setting = "regression_1d/nce_plus"
    trainer = build_trainer(config, setting=setting, visdom=True, visdom_port=visdom_server, verbose=False)
    history = trainer.train()
    vis = VisdomPlotter(env="regression_1d_nce_plus", port=visdom_server).vis
    data = json.loads(vis.get_window_data(VisdomPlotter.window_id("loss"), env="regression_1d_nce_plus"))
    traces = {t["name"]: t for t in data["content"]["data"]}
    assert traces["train"]["x"] == [1, 2]
    expected = [r["loss"] for r in history]
    assert all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(traces["train"]["y"], expected, strict=True))
    port = free_port()
    trainer = build_trainer(config, setting=setting, visdom=True, visdom_port=port, verbose=False)
    with pytest.raises(VisdomUnavailable, match=rf"python -m ltr.admin.visdom_server --port {port}"):
        trainer.train()
