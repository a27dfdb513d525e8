"""An ONNX export of a tiny random checkpoint, made once per test session by the real command line
(``python -m pytracking.export_onnx``), for the tests marked slow (an export takes about a minute here)."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tracker.helpers import write_tiny_checkpoint

#: parameter overrides of the exports and trackers of these tests: every frame a normal one (the random
#: network's scores would otherwise be "not found"), and a refinement step large enough that the gradient
#: moves the boxes by pixels
OPENED = ("target_not_found_threshold=-1e9", "distractor_threshold=1e9", "hard_negative_threshold=1e9")
REFINE = ("refine_step=0.05",)


@dataclass(frozen=True)
class Export:
    checkpoint: Path
    folder: Path


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory) -> Export:
    from pytracking.export_onnx import main

    tmp = tmp_path_factory.mktemp("onnx")
    ckpt = write_tiny_checkpoint(tmp / "tiny.pth.tar")
    folder = tmp / "export"
    assert main(["dimp", "nce_plus_tiny", *OPENED, *REFINE, "--net", str(ckpt), "--out", str(folder)]) == 0
    return Export(ckpt, folder)
