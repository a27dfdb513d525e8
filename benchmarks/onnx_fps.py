"""Tracker frame rate with the ONNX Runtime backend (float32 and int8) against the PyTorch path, on the CPU.

    python benchmarks/onnx_fps.py [--geometry dimp50|super_dimp] [--pytracking PATH] [--rounds 3]
                                  [--frames 20] [--warmup 2] [--threads 1] [--calibration-frames 16]
                                  [--exports DIR]

The network, video, thresholds and turn-taking are ``benchmarks/tracker_fps.py``'s: pytracking's
``dimpnet50`` with the seeded weights of the tracker golden files, converted and loaded as a user gets it,
every frame localised in full, refined and learnt from; the trackers take turns frame by frame (order
reversed every other frame), so a drift of the shared machine's speed falls on all alike. Trackers: ``torch``
(the plain PyTorch path, the baseline of the printed ratios unless ``--pytracking`` puts pytracking's own
DiMP tracker first), ``ort float32`` (the models of ``python -m pytracking.export_onnx``) and ``ort int8``
(the same, quantised, calibrated on ``--calibration-frames`` frames of the synthetic videos' val split).
The exports are made in a temporary folder, or kept in and reused from ``--exports DIR``. ONNX Runtime and
torch get ``--threads`` intra-op threads each. Printed per round and tracker: initialisation seconds, frames
per second, the ratio to the first tracker and the largest box difference from it; then our trackers' time
per stage and the median ratios. On these random weights the score map is nearly flat, so the int8 models'
rounding sends the int8 tracker to other peaks than float32's: its boxes differ, its speed is comparable.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.tracker_fps import (  # noqa: E402
    KWDS,
    OPEN,
    Timed,
    make_video,
    pytracking_tracker,
    report,
)
from ltr.admin.import_pytracking import convert  # noqa: E402
from pytracking.onnx.export import export_dimp  # noqa: E402
from pytracking.onnx.manifest import OnnxExportError, read_manifest  # noqa: E402
from pytracking.onnx.quantize import quantize_export  # noqa: E402
from pytracking.parameter.dimp import get_parameters  # noqa: E402
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, LoadedNet, load_network  # noqa: E402
from pytracking.tracker.dimp.timing import StageTimer  # noqa: E402
from tests.golden.pytracking_format import write_pytracking_checkpoint  # noqa: E402
from tests.golden.seeded import tracker_golden_weights  # noqa: E402


def exports(
    loaded: LoadedNet, params: DiMPParams, geometry: str, folder: Path, calibration: int
) -> dict[str, Path]:
    """The float32 and int8 export folders of ``loaded`` under ``folder`` (made unless already there)."""
    out = {"float32": folder / f"{geometry}_float32", "int8": folder / f"{geometry}_int8"}
    if not _ready(out["float32"], "float32"):
        print(f"exporting {geometry} to {out['float32']}", flush=True)
        shutil.rmtree(out["float32"], ignore_errors=True)
        export_dimp(loaded, params, out["float32"], param_name=geometry, checkpoint=None)
    if not _ready(out["int8"], "int8"):
        print(f"quantising {geometry} to {out['int8']} ({calibration} calibration frames)", flush=True)
        shutil.rmtree(out["int8"], ignore_errors=True)
        shutil.copytree(out["float32"], out["int8"])
        quantize_export(out["int8"], loaded, params, num_frames=calibration)
    return out


def _ready(folder: Path, precision: str) -> bool:
    """Whether ``folder`` holds a finished export of ``precision`` that this version reads."""
    try:
        return read_manifest(folder).precision == precision
    except OnnxExportError:  # none yet, half-written, or of an older manifest version
        return False


class ModelTimes:
    """Seconds and calls per model of a tracker's ONNX Runtime sessions, counted while ``active``."""

    def __init__(self, sessions: dict[str, Any], windows: dict[str, int]) -> None:
        self.seconds: Counter = Counter()
        self.calls: Counter = Counter()
        self.frames = 0
        self.active = False
        self.windows = windows  # the stages' counts of refinement windows (all calls, not only the timed)
        for name, session in sessions.items():
            session.run = self._timed(name, session.run)

    def _timed(self, name: str, run: Callable[..., Any]) -> Callable[..., Any]:
        def timed_run(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return run(*args, **kwargs)
            start = time.perf_counter()
            try:
                return run(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed_run

    def line(self) -> str:
        return ", ".join(
            f"{name} {1000 * self.seconds[name] / self.calls[name]:.2f} ({self.calls[name] / self.frames:g})"
            for name in self.calls
        )


def timed(name: str, loaded: LoadedNet, params: DiMPParams) -> tuple[Timed, ModelTimes | None]:
    """The tracker under ``name`` and, for the ONNX Runtime backend, the per-model times of its sessions."""
    timer = StageTimer()
    tracker = DiMPTracker(loaded.net, loaded.geometry, params, timer=timer)
    sessions = getattr(tracker.stages, "sessions", None)
    models = ModelTimes(sessions, tracker.stages.windows) if sessions is not None else None  # type: ignore[attr-defined]

    def track(frame: np.ndarray) -> tuple[np.ndarray, str]:
        if models is None:
            return tracker.track(frame), tracker.debug_info["state"]
        models.active = True
        models.frames += 1
        try:
            return tracker.track(frame), tracker.debug_info["state"]
        finally:
            models.active = False

    return Timed(name, tracker.initialize, track, timer), models


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--geometry", choices=sorted(KWDS), default="super_dimp", help="parameter set")
    ap.add_argument(
        "--pytracking", type=Path, help="a pytracking checkout: also time its DiMP tracker (first)"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=20, help="timed frames per round and tracker")
    ap.add_argument("--warmup", type=int, default=2, help="untimed frames after initialisation")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads of torch and ONNX Runtime")
    ap.add_argument("--calibration-frames", type=int, default=16, help="int8 calibration frames")
    ap.add_argument("--exports", type=Path, default=None, help="keep (and reuse) the exports in this folder")
    args = ap.parse_args(argv)
    if (
        args.rounds < 1
        or args.frames < 1
        or args.warmup < 0
        or args.threads < 1
        or args.calibration_frames < 1
    ):
        ap.error(
            "--rounds, --frames, --threads and --calibration-frames must be positive, --warmup not negative"
        )
    torch.set_num_threads(args.threads)
    frames, init_box = make_video(1 + args.warmup + args.frames)
    seed, state = tracker_golden_weights(args.geometry)
    with tempfile.TemporaryDirectory() as tmp:
        src = write_pytracking_checkpoint(Path(tmp) / f"{args.geometry}.pth.tar", state, KWDS[args.geometry])
        loaded = load_network(convert(src, Path(tmp) / "converted.pth.tar", args.geometry))
        params = dataclasses.replace(get_parameters(args.geometry), seed=seed, **OPEN)
        folder = args.exports or Path(tmp)
        dirs = exports(loaded, params, args.geometry, folder, args.calibration_frames)
        entries = [timed("torch", loaded, params)[0]]
        models: dict[str, ModelTimes] = {}
        for precision, path in dirs.items():
            ort_params = dataclasses.replace(params, backend="onnxruntime", onnx_dir=str(path))
            entry, times = timed(f"ort {precision}", loaded, ort_params)
            entries.append(entry)
            if times is not None:
                models[entry.name] = times
    if args.pytracking is not None:
        entries.insert(0, pytracking_tracker(args.pytracking, args.geometry, seed, state))
    import onnxruntime

    print(
        f"geometry {args.geometry}, torch {torch.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"{args.threads} thread(s), {args.rounds} rounds of {args.frames} timed frames (+{args.warmup} warm-up) "
        "per tracker; localisation thresholds: not found -inf, distractor and hard negative +inf"
    )
    report(entries, frames, init_box, args.rounds, args.warmup)
    for name, times in models.items():
        print(f"{name}, ms per model call while tracking (calls per frame): {times.line()}")
    for name, times in models.items():
        windows = times.windows
        print(
            f"{name}: {windows['refinements']} refinements on a window of the box maps, {windows['whole']} of them "
            "fell back to the whole maps"
        )


if __name__ == "__main__":
    main()
