"""The real VOT toolkit (``vot evaluate`` / ``vot analysis``, offline) runs our tracker over TraX, end to end.

The toolkit lives in its own environment (``make install-vot-toolkit`` makes ``.venv-vot``; or set
``EBMTRACK_VOT`` to a ``vot`` executable). The workspace holds synthetic sequences in the VOT layout (one with
polygon ground truth) and a stack with the three kinds of experiment the VOT stacks use: ``multistart``
(VOT2020+ short-term, e.g. vot2022/shorttermbox), ``supervised`` (VOT2013-2019 baseline, with reset after
failure) and ``unsupervised``. The tracker is a random tiny DiMP network without box refinement, so its box
keeps its size and only the classifier moves it. The test reads the toolkit's own analysis file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("trax", reason="the TraX server needs the vot extra (pip install 'ebmtrack[vot]')")

from ltr.dataset.registry import get_dataset  # noqa: E402
from pytracking.vot.sequences import write_vot_sequences  # noqa: E402
from pytracking.vot.workspace import main as setup_workspace  # noqa: E402
from tests.tracker.helpers import write_tiny_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
TRACKER = "ebmtrack_dimp_nce_plus_tiny"
FRAMES = 20
STACK = """title: ebmtrack test stack
experiments:
  baseline:
    type: multistart
    analyses:
      - type: multistart_average_ar
        name: ar
  supervised:
    type: supervised
    repetitions: 1
    skip_initialize: 5
    analyses:
      - type: supervised_average_ar
        sensitivity: 30
        name: ar
      - type: cumulative_failures
        name: failures
  unsupervised:
    type: unsupervised
    repetitions: 1
    analyses:
      - type: average_accuracy
        name: accuracy
        burnin: 0
"""
UNSUPERVISED_ONLY = STACK[: STACK.index("  baseline:")] + STACK[STACK.index("  unsupervised:") :]


def _toolkit() -> str:
    found = os.environ.get("EBMTRACK_VOT") or str(REPO / ".venv-vot" / "bin" / "vot")
    if not Path(found).is_file():
        found = shutil.which("vot") or ""
    if not found:
        pytest.skip(
            "no VOT toolkit: run `make install-vot-toolkit` (or set EBMTRACK_VOT to a vot executable)"
        )
    return found


def _vot(*args: str, workspace: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [_toolkit(), *args, "--workspace", str(workspace)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _workspace(root: Path, stack: str, checkpoint: Path, names: list[str]) -> Path:
    (root / "stack.yaml").parent.mkdir(parents=True, exist_ok=True)
    (root / "stack.yaml").write_text(stack)
    code = setup_workspace(
        [
            str(root),
            "dimp",
            "nce_plus_tiny",
            "refine=false",
            "--net",
            str(checkpoint),
            "--stack",
            "stack.yaml",
        ]
    )
    assert code == 0
    write_vot_sequences(get_dataset("synthetic"), root / "sequences", names, FRAMES, anchor_every=10)
    return root


def _as_polygons(groundtruth: Path) -> None:
    lines = []
    for line in groundtruth.read_text().splitlines():
        x, y, w, h = (float(v) for v in line.split(","))
        lines.append(",".join(f"{v:.4f}" for v in (x, y, x + w, y, x + w, y + h, x, y + h)))
    groundtruth.write_text("\n".join(lines) + "\n")


def test_vot_evaluate_and_analysis_run_our_tracker(tmp_path: Path) -> None:
    checkpoint = write_tiny_checkpoint(tmp_path / "tiny 100%.pth")  # the toolkit quotes and interpolates
    ws = _workspace(tmp_path / "ws", STACK, checkpoint, ["checkerblob-1", "stripespolygon-1"])
    _as_polygons(ws / "sequences" / "stripespolygon-1" / "groundtruth.txt")

    run = _vot("evaluate", "--persist", TRACKER, workspace=ws)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "error" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
    analysis = _vot("analysis", "--format", "json", "--name", "report", TRACKER, workspace=ws)
    assert analysis.returncode == 0, analysis.stdout + analysis.stderr
    report = json.loads((ws / "analysis" / "report.json").read_text())

    assert set(report["sequences"]) == {"checkerblob-1", "stripespolygon-1"}
    results = report["results"]
    # multistart: [accuracy, robustness, ...] of the one tracker; anchors at frames 0 and 10 of each sequence
    accuracy, robustness = results["baseline"]["results"][0][0][:2]
    assert 0.2 < accuracy <= 1 and 0.1 < robustness <= 1
    # supervised with resets: accuracy, and fewer failures than the 2 x 20 frames could hold
    assert 0.1 < results["supervised"]["results"][0][0][0] <= 1
    assert results["supervised"]["results"][1][0][0] < 8
    assert 0.2 < results["unsupervised"]["results"][0][0][0] <= 1
    # the toolkit kept our tracker's trajectories in its own format, one per anchor (multistart)
    kept = sorted(p.name for p in (ws / "results" / TRACKER / "baseline" / "checkerblob-1").glob("*.bin"))
    assert kept == ["checkerblob-1_00000000.bin", "checkerblob-1_00000010.bin"]


def test_a_sequence_that_crashes_the_tracker_fails_alone(tmp_path: Path) -> None:
    checkpoint = write_tiny_checkpoint(tmp_path / "tiny.pth")
    ws = _workspace(tmp_path / "ws", UNSUPERVISED_ONLY, checkpoint, ["checkerblob-1", "stripesellipse-1"])
    (ws / "sequences" / "checkerblob-1" / "color" / "00000006.jpg").write_bytes(b"\xff\xd8 truncated")

    run = _vot("evaluate", "--persist", TRACKER, workspace=ws)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    assert "checkerblob-1" in output and "00000006.jpg" in output  # the toolkit shows our one-line reason
    unsupervised = ws / "results" / TRACKER / "unsupervised"
    assert not list((unsupervised / "checkerblob-1").glob("*.bin"))
    assert len(list((unsupervised / "stripesellipse-1").glob("*.bin"))) == 1
