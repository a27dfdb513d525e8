"""The tiny detector's cache key: ``detector_seed`` and ``detector_clean_labels`` share one detector."""

import pytest
import torch

from ltr.admin.config import apply_overrides
from ltr.detection.detector_train import detector_checkpoint_path
from ltr.detection.pipeline import build_setup
from ltr.train_settings.detection import SETTINGS

TINY = [
    "synthetic.num_train=2",
    "synthetic.num_val=1",
    "synthetic.num_test=1",
    "synthetic.image_size=64",
    "synthetic.min_box=12",
    "synthetic.max_box=30",
    "detector_iters=1",
]


def _detectors(workspace):
    return sorted(p.name for p in (workspace / "detection").glob("detector_tiny_*.pth"))


@pytest.mark.slow  # trains three 1-iteration detectors: ~6 s on the shared CPU
def test_detector_seed_decouples_the_detector_from_the_head_seed(tmp_path):
    cpu = torch.device("cpu")
    quiet = lambda _: None  # noqa: E731
    base = apply_overrides(SETTINGS["nce_plus_tiny"](), TINY)
    assert base.detector_seed == -1
    first = build_setup(base, tmp_path, cpu, quiet)
    path = detector_checkpoint_path(tmp_path / "detection", base.synthetic, 1, base.detector_lr, 0)
    assert _detectors(tmp_path) == [path.name]
    # another head seed on the same detector: nothing new is trained, the weights are the cached ones
    shared = build_setup(apply_overrides(base, ["seed=1", "detector_seed=0"]), tmp_path, cpu, quiet)
    assert _detectors(tmp_path) == [path.name]
    a, b = first.detector.state_dict(), shared.detector.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # seed alone (detector_seed=-1) also reseeds the detector: a second, different one
    other = build_setup(apply_overrides(base, ["seed=1"]), tmp_path, cpu, quiet)
    assert len(_detectors(tmp_path)) == 2
    c = other.detector.state_dict()
    assert not all(torch.equal(a[k], c[k]) for k in a)
    # noisy train labels with detector_clean_labels: the clean set's detector, no new one is trained
    noisy = ["synthetic.annotation_noise=0.05", "detector_clean_labels=true"]
    setup = build_setup(apply_overrides(base, noisy), tmp_path, cpu, quiet)
    assert len(_detectors(tmp_path)) == 2 and setup.root.name != first.root.name
    d = setup.detector.state_dict()
    assert all(torch.equal(a[k], d[k]) for k in a)
    # without it the detector is trained on the noisy labels: a third one
    build_setup(apply_overrides(base, noisy[:1]), tmp_path, cpu, quiet)
    assert len(_detectors(tmp_path)) == 3
