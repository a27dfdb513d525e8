"""``params.compile``: the per-frame backbone, classifier feature head and box score through torch.compile (real
Inductor, real C++ compiler), the same boxes as eager, and a warned eager fallback when the toolchain fails."""

import dataclasses
import gc
import warnings
import weakref

import numpy as np
import pytest
import torch

from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.compiled import CompiledStage, compiled_box_score, compiled_stage
from tests.tracker.helpers import random_frame

OPENED = {"target_not_found_threshold": -1e9, "distractor_threshold": 1e9, "hard_negative_threshold": 1e9}


def track(loaded, compile_: bool, frames) -> np.ndarray:
    params = DiMPParams(train_setting="nce_plus_tiny", compile=compile_, **OPENED)
    tracker = DiMPTracker(loaded.net, loaded.geometry, params)
    tracker.initialize(frames[0], [60.0, 40.0, 24.0, 20.0])
    return np.stack([tracker.track(f) for f in frames[1:]])


def test_compiled_stages_give_the_eager_boxes_and_are_shared_per_network():
    rng = np.random.default_rng(3)
    frames = [random_frame(rng, 120, 160) for _ in range(4)]
    loaded = random_network("nce_plus_tiny", crop_size=64)
    eager = track(loaded, False, frames)
    compiled = track(loaded, True, frames)
    stage = compiled_stage(loaded.net.backbone, "backbone")
    assert stage.compiled  # it did not fall back
    assert compiled_box_score(loaded.net.box_head).compiled  # the refinement's score, gradient included
    np.testing.assert_allclose(compiled, eager, rtol=0, atol=1e-3)
    assert not np.allclose(eager[:, 2:], [24.0, 20.0])  # refinement ran
    # a second tracker on the same network reuses the compiled stage
    tracker = DiMPTracker(
        loaded.net, loaded.geometry, DiMPParams(train_setting="nce_plus_tiny", compile=True)
    )
    assert tracker.stages.backbone is stage


def test_a_failing_compiler_warns_once_and_runs_eagerly():
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    stage = CompiledStage(module, "test conv")
    x = torch.randn(1, 3, 8, 8)
    # a real toolchain failure: Inductor's C++ compiler does not exist (and no cached build may hide that),
    # set through torch.compile's public options
    stage._fn = torch.compile(
        module, dynamic=False, options={"cpp.cxx": ("/nonexistent/bin/c++",), "fx_graph_cache": False}
    )
    with torch.no_grad():
        with pytest.warns(RuntimeWarning, match="test conv failed .*C\\+\\+ compiler"):
            out = stage(x)
        assert not stage.compiled
        torch.testing.assert_close(out, module(x))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the fallback warns once: a second warning would raise here
            torch.testing.assert_close(stage(x), module(x))


def test_compile_must_be_a_bool():
    with pytest.raises(ValueError, match="compile"):
        DiMPParams(train_setting="nce_plus_tiny", compile="yes")


def test_a_compiled_stage_lives_and_dies_with_its_module():
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    stage = compiled_stage(module, "conv")
    assert compiled_stage(module, "conv") is stage
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(stage(x), module(x))
    assert stage.compiled
    assert list(module.state_dict()) == ["0.weight", "0.bias"]  # not a submodule: checkpoints are unchanged
    ref = weakref.ref(module)
    del module, stage
    gc.collect()
    assert ref() is None


@pytest.mark.slow
def test_compiled_stages_in_lockstep_give_each_sequence_its_eager_boxes_alone():
    """Lockstep with ``compile``: the crops are padded to the batch size, so the compiled stages see one shape
    while sequences of different lengths join and end and the batch thins out."""
    from tests.tracker.test_lockstep import alone, in_lockstep, lockstep_videos

    videos = lockstep_videos()
    loaded = random_network("nce_plus_tiny", crop_size=64)
    eager = DiMPParams(train_setting="nce_plus_tiny", **OPENED)
    compiled = dataclasses.replace(eager, compile=True)
    together = in_lockstep(loaded, compiled, videos, pad_to=len(videos))
    assert compiled_stage(loaded.net.backbone, "backbone").compiled
    for (video, init, _), boxes in zip(videos, together, strict=True):
        single = alone(loaded, eager, video, init)
        np.testing.assert_allclose(
            np.stack([b for b, _ in boxes]), np.stack([b for b, _ in single]), rtol=0, atol=1e-3
        )
