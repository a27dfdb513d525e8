"""The TraX server, driven over pipes as the VOT toolkit drives it: same boxes as the tracker in process,
polygons, re-initialisation, argument errors before the handshake, and a clean failure on a bad frame."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("trax", reason="the TraX server needs the vot extra (pip install 'ebmtrack[vot]')")

from trax import TraxException  # noqa: E402

from ltr.dataset.base import read_image_checked  # noqa: E402
from ltr.dataset.registry import get_dataset  # noqa: E402
from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker, prepare_spec  # noqa: E402
from pytracking.vot.client import TraxSession  # noqa: E402
from pytracking.vot.regions import polygon_to_box  # noqa: E402
from pytracking.vot.sequences import write_sequence  # noqa: E402
from tests.tracker.helpers import write_tiny_checkpoint  # noqa: E402

FRAMES = 8
ENV = {"OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def sequence_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("vot") / "seq"
    seq = get_dataset("synthetic").get_sequence("checkerblob-1")
    write_sequence(seq, folder, max_frames=FRAMES)
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_checkpoint(tmp_path_factory.mktemp("net") / "tiny.pth")


def _frames(folder: Path) -> list[Path]:
    return [folder / "color" / f"{i:08d}.jpg" for i in range(1, FRAMES + 1)]


def _first_box(folder: Path) -> list[float]:
    return [float(v) for v in (folder / "groundtruth.txt").read_text().splitlines()[0].split(",")]


def _server(checkpoint: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytracking.vot", "dimp", "nce_plus_tiny", "--net", str(checkpoint), *args]


def _in_process(checkpoint: Path, frames: list[Path], box: list[float]) -> np.ndarray:
    spec, _ = prepare_spec(TrackerSpec("dimp", "nce_plus_tiny", str(checkpoint), "cpu"))
    tracker = build_tracker(spec)
    tracker.initialize(read_image_checked(frames[0]), box)
    return np.array([tracker.track(read_image_checked(f)) for f in frames[1:]])


def test_boxes_equal_the_tracker_run_in_process(sequence_dir: Path, checkpoint: Path) -> None:
    frames, box = _frames(sequence_dir), _first_box(sequence_dir)
    with TraxSession(_server(checkpoint, "--device", "cpu"), env=ENV) as session:
        init, _ = session.initialize(frames[0], box)
        answers = [session.frame(f) for f in frames[1:]]
        assert session.close() == 0
    np.testing.assert_allclose(init, box, atol=1e-3)
    served = np.array([a[0] for a in answers])
    # TraX carries float32 rectangles; the process runs the same code with one thread
    np.testing.assert_allclose(served, _in_process(checkpoint, frames, box), rtol=1e-6, atol=1e-3)
    assert all(0 < float(p["confidence"]) < 10 for _, p in answers)


def test_polygon_start_and_a_second_initialize_start_afresh(sequence_dir: Path, checkpoint: Path) -> None:
    frames, (x, y, w, h) = _frames(sequence_dir), _first_box(sequence_dir)
    polygon = [x, y, x + w, y, x + w, y + h, x, y + h]
    with TraxSession(_server(checkpoint), env=ENV) as session:
        session.initialize(frames[0], polygon)
        first = [session.frame(f)[0] for f in frames[1:4]]
        session.initialize(frames[0], polygon)  # the toolkit re-initialises after a failure
        again = [session.frame(f)[0] for f in frames[1:4]]
    np.testing.assert_array_equal(first, again)
    expected = _in_process(checkpoint, frames[:4], list(polygon_to_box(polygon)))
    np.testing.assert_allclose(first, expected, rtol=1e-6, atol=1e-3)


def test_unreadable_frame_ends_the_session_with_its_reason(
    sequence_dir: Path, checkpoint: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"not a jpeg")
    frames = _frames(sequence_dir)
    session = TraxSession(_server(checkpoint), env=ENV)
    session.initialize(frames[0], _first_box(sequence_dir))
    with pytest.raises(TraxException, match="broken.jpg"):
        session.frame(broken)
    assert session.process.wait(timeout=30) == 1
    session.process.stdin.close()
    session.process.stdout.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dimp", "nope"], "has no parameter set 'nope'|unknown dimp parameter set 'nope'"),
        (["dimp", "nce_plus_tiny", "--net", "missing.pth"], "missing.pth: no such checkpoint file"),
        (["dimp", "nce_plus_tiny", "refine"], "expected key=value"),
        (["dimp", "nce_plus_tiny", "no_such_field=1", "--net", "{ckpt}"], "no_such_field"),
        (["dimp", "nce_plus_tiny", "--net", "{ckpt}", "--device", "tpu"], "device must be auto, cpu or cuda"),
    ],
)
def test_argument_errors_are_one_line_before_the_handshake(
    checkpoint: Path, args: list[str], message: str
) -> None:
    args = [a.replace("{ckpt}", str(checkpoint)) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "pytracking.vot", *args], capture_output=True, text=True, timeout=120, env=None
    )
    assert done.returncode == 2
    assert done.stdout == ""  # nothing on the TraX channel
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert any(m in lines[0] for m in message.split("|")), lines[0]


def test_sequence_writer_layout(sequence_dir: Path) -> None:
    seq = get_dataset("synthetic").get_sequence("checkerblob-1")
    lines = (sequence_dir / "groundtruth.txt").read_text().splitlines()
    assert len(lines) == FRAMES
    np.testing.assert_allclose(
        [[float(v) for v in line.split(",")] for line in lines], seq.boxes[:FRAMES], atol=6e-5
    )
    assert (sequence_dir / "anchor.value").read_text().split() == ["1"] + ["0"] * (FRAMES - 1)
    assert "channels.color=color/%08d.jpg" in (sequence_dir / "sequence").read_text()
    image = cv2.imread(str(_frames(sequence_dir)[3]))[..., ::-1].astype(np.int16)
    assert np.abs(image - seq.frame(3).astype(np.int16)).mean() < 6  # JPEG quality 95 on fine texture
