"""run_video on generated video files: --init, --save (frame count kept), and the no-display error."""

import cv2
import numpy as np
import pytest

from pytracking.run_video import main
from tests.tracker.helpers import write_tiny_checkpoint


def write_video(path, num_frames, codec, size=(64, 48)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), 10.0, size)
    assert writer.isOpened(), f"cannot write {path}"
    rng = np.random.default_rng(0)
    for i in range(num_frames):
        frame = rng.integers(0, 60, (size[1], size[0], 3), dtype=np.uint8)
        frame[10:20, 10 + i : 22 + i] = 255  # a bright block moving right
        writer.write(frame)
    writer.release()
    return path


def count_frames(path):
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


@pytest.mark.parametrize(("ext", "codec"), [(".avi", "MJPG"), (".mp4", "mp4v")])
def test_track_and_save(tmp_path, capsys, ext, codec):
    video = write_video(tmp_path / f"in{ext}", 7, codec)
    assert count_frames(video) == 7
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    out = tmp_path / f"out{ext}"
    argv = ["dimp", "nce_plus_tiny", str(video), "--init", "10,10,12,10", "--save", str(out)]
    assert main([*argv, "--net", str(ckpt), "--device", "cpu"]) == 0
    assert count_frames(out) == 7
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 7 and lines[0] == "0,10.0,10.0,12.0,10.0"
    boxes = np.array([[float(v) for v in line.split(",")[1:]] for line in lines])
    assert np.isfinite(boxes).all() and (boxes[:, 2:] > 0).all()


def test_no_init_without_display_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    video = write_video(tmp_path / "in.avi", 2, "MJPG")
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    assert main(["dimp", "nce_plus_tiny", str(video), "--net", str(ckpt), "--device", "cpu"]) == 2
    assert "pass --init x,y,w,h" in capsys.readouterr().err


def test_bad_source_and_bad_init(tmp_path, capsys):
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    argv = ["dimp", "nce_plus_tiny", str(tmp_path / "missing.mp4"), "--init", "1,1,4,4", "--net", str(ckpt)]
    assert main(argv) == 2
    assert "cannot open video file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["dimp", "nce_plus_tiny", "0", "--init", "1,1,0,4"])


def test_int8_flag_reaches_the_tracker(tmp_path, capsys, monkeypatch):
    """``--int8`` turns on the parameter set's ``int8_heads`` (as ``run_tracker.py --int8``)."""
    import pytracking.run_video as run_video

    seen = []
    original = run_video.build_tracker

    def recording(spec, *args, **kwargs):
        seen.append((spec.int8, spec.compile, spec.net is not None))
        return original(spec, *args, **kwargs)

    monkeypatch.setattr(run_video, "build_tracker", recording)
    video = write_video(tmp_path / "in.avi", 3, "MJPG")
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    argv = [
        "dimp",
        "nce_plus_tiny",
        str(video),
        "--init",
        "10,10,12,10",
        "--net",
        str(ckpt),
        "--device",
        "cpu",
    ]
    assert main([*argv, "--int8"]) == 0
    assert main(argv) == 0
    assert seen == [(True, False, True), (False, False, True)]
    assert len(capsys.readouterr().out.strip().splitlines()) == 6
