"""run_video on generated video files: --init, --save (frame count kept), the frame rate, and one-line errors for
every user mistake (no display, bad source or box, bad checkpoint, no GPU), checked before any work."""

import re

import cv2
import numpy as np
import pytest
import torch

from pytracking.run_video import main
from tests.tracker.bad_checkpoints import BAD_CHECKPOINTS
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
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 7 and lines[0] == "0,10.0,10.0,12.0,10.0"
    rate = re.fullmatch(
        r"7 frames: (\d+\.\d) frames per second \(tracker, frames after the first\), (\d+\.\d) with video "
        r"reading and writing",
        captured.err.strip().splitlines()[-1],
    )
    assert rate and float(rate.group(1)) > 0 and float(rate.group(2)) > 0  # values: no timed assertions
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
    with pytest.raises(SystemExit) as exit_:
        main(["dimp", "nce_plus_tiny", "0", "--init", "1,1,0,4"])
    assert exit_.value.code == 2
    assert "argument --init: --init '1,1,0,4': init box must have w > 0 and h > 0" in capsys.readouterr().err


@pytest.mark.parametrize("case", sorted(BAD_CHECKPOINTS))
def test_bad_checkpoint_is_one_error_line_before_the_video_is_opened(tmp_path, capsys, case):
    path, fragment = BAD_CHECKPOINTS[case](tmp_path)
    missing_video = str(tmp_path / "missing.mp4")  # the checkpoint is checked first
    argv = [
        "dimp",
        "nce_plus_tiny",
        missing_video,
        "--init",
        "1,1,4,4",
        "--net",
        str(path),
        "--device",
        "cpu",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}: ") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_one_error_line(tmp_path, capsys):
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    argv = ["dimp", "nce_plus_tiny", str(tmp_path / "v.mp4"), "--init", "1,1,4,4", "--net", str(ckpt)]
    assert main([*argv, "--device", "cuda"]) == 2
    assert capsys.readouterr().err == (
        "error: device=cuda was asked for but CUDA is not available (use --device cpu or auto)\n"
    )


def test_init_box_outside_the_frame_and_parameter_set_warning(tmp_path, capsys):
    video = write_video(tmp_path / "in.avi", 3, "MJPG")
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    argv = ["dimp", "nce_plus_tiny", str(video), "--net", str(ckpt), "--device", "cpu"]
    assert main([*argv, "--init", "70,10,5,5"]) == 2
    assert capsys.readouterr().err == (
        "error: init box x, y, w, h = [70.0, 10.0, 5.0, 5.0] lies entirely outside the 64x48 frame\n"
    )
    argv[1] = "nce_plus"  # tuned for the ResNet-50 network: a warning, then it tracks
    assert main([*argv, "--init", "10,10,12,10"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("warning: parameter set 'nce_plus' is tuned for the resnet50")
    assert err[0].endswith("parameter sets tuned for it: nce_plus_tiny, nce_plus_tiny_long")


def test_unwritable_save_path_is_one_error_line(tmp_path, capsys):
    video = write_video(tmp_path / "in.avi", 2, "MJPG")
    ckpt = write_tiny_checkpoint(tmp_path / "tiny.pth.tar")
    (tmp_path / "a_file").write_text("not a folder\n")
    out = tmp_path / "a_file" / "out.avi"
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
    assert main([*argv, "--save", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "a_file" in err and err.count("\n") == 1
