"""Track a target in a video file or camera stream.

``python pytracking/run_video.py dimp nce_plus VIDEO_OR_CAMERA_INDEX [--init x,y,w,h] [--save out.mp4]
[--net PATH] [--device auto|cpu|cuda] [--compile] [--cuda-graph]``

The initial box (xywh pixels of the first frame) comes from ``--init``; without it the box is drawn with
``cv2.selectROI``, which needs a display and an OpenCV build with GUI support (a clear error otherwise).
``--save`` writes every frame with the tracked box (codec from the extension: mp4v for .mp4, MJPG for .avi);
the boxes are printed as ``frame,x,y,w,h`` lines. ``--compile`` is ``run_tracker.py``'s: torch.compile of the
per-frame stages; ``--cuda-graph`` its refinement as a CUDA graph on a GPU. At the end one line on stderr
gives the frame rate: the tracker's own (frames after the first over the time spent in ``track``) and the
whole loop's (with video decoding and writing).

As in ``run_tracker.py``, the device and the checkpoint are checked before the video is opened (one
``error:`` line naming the argument or file, exit status 2), and a parameter set tuned for another kind of
network is a ``warning:`` line.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from ltr.admin.cpu_memory import reuse_freed_memory
from ltr.admin.extras import MissingExtra
from pytracking.evaluation.host_threads import host_threads
from pytracking.evaluation.tracker_spec import TRACKERS, TrackerSpec, build_tracker, prepare_spec
from pytracking.tracker.dimp.frames import TrackerInputError, validate_init_box
from pytracking.visdom_view import draw_boxes


class VideoError(RuntimeError):
    """The video/camera cannot be opened, or no initial box can be had."""


def parse_box(text: str) -> np.ndarray:
    """``"x,y,w,h"`` -> (4,) float64 xywh; an error naming the argument otherwise."""
    try:
        box = np.array([float(v) for v in text.split(",")], dtype=np.float64)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--init {text!r}: expected four numbers x,y,w,h") from err
    try:
        return validate_init_box(box)  # the Python API's rule
    except TrackerInputError as err:
        raise argparse.ArgumentTypeError(f"--init {text!r}: {err}") from err


def open_capture(source: str) -> cv2.VideoCapture:
    """A cv2.VideoCapture of a file path or a camera index (a string of digits)."""
    cap = cv2.VideoCapture(int(source)) if source.isdigit() else cv2.VideoCapture(source)
    if not cap.isOpened():
        what = f"camera {source}" if source.isdigit() else f"video file {source}"
        raise VideoError(f"cannot open {what}")
    return cap


def has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")) or sys.platform in (
        "win32",
        "darwin",
    )


def select_box(frame_bgr: np.ndarray) -> np.ndarray:
    """Let the user draw the initial box (cv2.selectROI); a clear error without a display."""
    if not has_display():
        raise VideoError("no --init box given and no display to draw one on; pass --init x,y,w,h")
    try:
        x, y, w, h = cv2.selectROI("select the target, then ENTER", frame_bgr, showCrosshair=True)
        cv2.destroyAllWindows()
    except cv2.error as err:
        raise VideoError(
            f"cannot draw the box (OpenCV has no GUI support here: {err}); pass --init x,y,w,h"
        ) from err
    if w <= 0 or h <= 0:
        raise VideoError("no box was drawn; pass --init x,y,w,h")
    return np.array([x, y, w, h], dtype=np.float64)


def _writer(path: Path, fps: float, size_wh: tuple[int, int]) -> cv2.VideoWriter:
    codec = "MJPG" if path.suffix.lower() == ".avi" else "mp4v"
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec), fps, size_wh)
    if not writer.isOpened():
        raise VideoError(f"cannot write video {path} with codec {codec}")
    return writer


@dataclass
class VideoRun:
    """boxes: (N, 4) xywh (frame 0 = the initial box); times: (N,) the tracker's seconds per frame (frame 0 =
    initialisation); wall_s: seconds of the whole loop, from the initialisation to the last box."""

    boxes: np.ndarray
    times: np.ndarray
    wall_s: float

    def rate_line(self) -> str:
        """One line with the frame rates (tracker only after the first frame, and the whole loop)."""
        n = len(self.boxes)
        tracked = float(self.times[1:].sum())
        tracker_fps = f"{(n - 1) / tracked:.1f}" if n > 1 and tracked > 0 else "n/a"
        loop_fps = f"{n / self.wall_s:.1f}" if self.wall_s > 0 else "n/a"
        return (
            f"{n} frames: {tracker_fps} frames per second (tracker, frames after the first), "
            f"{loop_fps} with video reading and writing"
        )


def track_video(spec: TrackerSpec, source: str, init: np.ndarray | None, save: Path | None) -> VideoRun:
    """Track every frame of ``source`` from ``init`` (or a drawn box); ``save`` writes the video with boxes."""
    cap = open_capture(source)
    writer = None
    try:
        ok, frame = cap.read()
        if not ok:
            raise VideoError(f"{source}: no frame could be read")
        box = select_box(frame) if init is None else init
        box = validate_init_box(box, (frame.shape[1], frame.shape[0]))
        tracker = build_tracker(spec)
        start = time.perf_counter()
        rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        t0 = time.perf_counter()
        tracker.initialize(rgb, box)
        times = [time.perf_counter() - t0]
        boxes = [box]
        if save is not None:
            fps = cap.get(cv2.CAP_PROP_FPS) or 25.0
            writer = _writer(save, fps if fps > 0 else 25.0, (frame.shape[1], frame.shape[0]))
            writer.write(cv2.cvtColor(draw_boxes(rgb, boxes[0]), cv2.COLOR_RGB2BGR))
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            rgb = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
            t0 = time.perf_counter()
            boxes.append(tracker.track(rgb))
            times.append(time.perf_counter() - t0)
            if writer is not None:
                writer.write(cv2.cvtColor(draw_boxes(rgb, boxes[-1]), cv2.COLOR_RGB2BGR))
        return VideoRun(np.stack(boxes), np.asarray(times), time.perf_counter() - start)
    finally:
        cap.release()
        if writer is not None:
            writer.release()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python pytracking/run_video.py", description=__doc__.split("\n")[0])
    p.add_argument("tracker", choices=TRACKERS.names)
    p.add_argument("param", help="; ".join(f"{t}: {', '.join(q)}" for t, q in TRACKERS.items()))
    p.add_argument("source", help="video file or camera index (0, 1, ...)")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="dimp: changes of parameter-set fields (run_tracker.py's)",
    )
    p.add_argument("--init", type=parse_box, default=None, help="initial box x,y,w,h (pixels)")
    p.add_argument("--save", type=Path, default=None, help="write the video with the box to this file")
    p.add_argument("--net", default=None, help="checkpoint (default: latest of the param's train setting)")
    p.add_argument("--device", default="auto")
    p.add_argument(
        "--compile",
        action="store_true",
        help="dimp: torch.compile the per-frame backbone, classifier features and box score",
    )
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        help="dimp on a GPU: replay the box refinement's steps as one captured CUDA graph (one launch per frame)",
    )
    args = p.parse_intermixed_args(argv)
    try:
        spec = TrackerSpec(
            args.tracker,
            args.param,
            args.net,
            args.device,
            compile=args.compile,
            overrides=tuple(args.overrides),
            cuda_graph=args.cuda_graph,
        )
        spec, warnings = prepare_spec(spec)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        reuse_freed_memory()  # the first frame's batch of crops on the CPU: see ltr.admin.cpu_memory
        with host_threads(spec.device):
            run = track_video(spec, args.source, args.init, args.save)
    except (
        VideoError,
        OSError,
        ValueError,
        MissingExtra,
    ) as err:  # CheckpointError, TrackerInputError: ValueErrors
        print(f"error: {err}", file=sys.stderr)
        return 2
    for i, b in enumerate(run.boxes):
        print(f"{i}," + ",".join(repr(float(v)) for v in b))
    print(run.rate_line(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
