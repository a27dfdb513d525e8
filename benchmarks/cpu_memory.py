"""What :func:`ltr.admin.cpu_memory.reuse_freed_memory` (called by the tracking and training commands) gives
on the CPU: B trackers of SuperDiMP's geometry in lockstep with glibc's default malloc and with the setting.

    python benchmarks/cpu_memory.py [--batches 1 4 16] [--frames 5] [--rounds 2] [--threads 2]
                                    [--geometry super_dimp|nce_plus_tiny] [--size 640x480]

The setting is process-wide and cannot be undone, so each measurement runs in a fresh process of its own:
per round, one process with the default malloc and one with the setting, in alternating order (a drift of
the machine's speed falls on both alike). Each process builds the network (random weights, seeded: both
modes track the same boxes), and for each B initialises B trackers on distinct frames of one in-memory video
(``benchmarks/tracker_fps.make_video``), advances them one frame untimed, then times ``--frames`` lockstep
frames (:func:`pytracking.tracker.dimp.lockstep.track_frames`). Printed per round, mode and B: frames per
second, the initialisation's seconds per tracker and the minor page faults per timed step (each one a page
the OS mapped and zero-filled); per process its peak resident memory (over all its B); then per B the
median ratio of the setting's frames per second to the default's, and the largest difference between the
two modes' boxes (0 px: malloc does not change any number).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODES = ("default", "reuse")


def child(args: argparse.Namespace) -> dict:
    """One process's measurements (the module docstring); the setting first, before any large allocation."""
    from ltr.admin.cpu_memory import reuse_freed_memory

    taken = reuse_freed_memory() if args.child == "reuse" else False
    import numpy as np
    import torch

    from benchmarks.tracker_fps import OPEN, TINY, make_video, video_box
    from pytracking.parameter.dimp import get_parameters
    from pytracking.tracker.dimp import DiMPTracker, random_network
    from pytracking.tracker.dimp.lockstep import track_frames

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    width, height = (int(v) for v in args.size.split("x"))
    loaded = random_network(TINY if args.geometry == TINY else "nce_plus")
    params = dataclasses.replace(get_parameters(args.geometry), **OPEN)
    most = max(args.batches)
    frames, _ = make_video(most + args.frames + 2, width, height)
    out: dict = {"taken": taken, "runs": {}}
    for b in args.batches:
        trackers = [DiMPTracker(loaded.net, loaded.geometry, params) for _ in range(b)]
        begin = time.perf_counter()
        for i, t in enumerate(trackers):
            t.initialize(frames[i], video_box(i))
        init_s = (time.perf_counter() - begin) / b
        track_frames(trackers, [frames[i + 1] for i in range(b)])  # untimed
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        begin = time.perf_counter()
        boxes = []
        for k in range(2, 2 + args.frames):
            boxes.append(track_frames(trackers, [frames[i + k] for i in range(b)]))
        seconds = time.perf_counter() - begin
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        out["runs"][str(b)] = {
            "fps": args.frames * b / seconds,
            "init_s": init_s,
            "faults_per_step": faults / args.frames,
            "boxes": np.asarray(boxes).tolist(),
        }
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return out


def run_child(mode: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", mode, "--batches", *map(str, args.batches)]
    command += ["--frames", str(args.frames), "--threads", str(args.threads), "--geometry", args.geometry]
    command += ["--size", args.size]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--frames", type=int, default=5, help="timed lockstep frames per B")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    ap.add_argument("--geometry", choices=["super_dimp", "nce_plus_tiny"], default="super_dimp")
    ap.add_argument("--size", default="640x480", help="frame size WxH")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    import numpy as np
    import torch

    print(
        f"lockstep, {args.geometry} geometry on the CPU, torch {torch.__version__}, {args.threads} threads, "
        f"{args.frames} timed frames per B; a fresh process per mode and round"
    )
    results: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(args.rounds):
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            got = run_child(mode, args)
            if mode == "reuse" and not got["taken"]:
                raise SystemExit("this C library does not take the setting (glibc only): nothing to compare")
            results[mode].append(got)
            print(f"round {r + 1}  {mode:<7}  peak resident memory {got['peak_mib']:.0f} MiB", flush=True)
            for b in args.batches:
                run = got["runs"][str(b)]
                print(
                    f"round {r + 1}  {mode:<7}  B={b:<3} {run['fps']:6.2f} FPS  init {run['init_s']:.3f} s/tracker"
                    f"  {run['faults_per_step']:9.0f} page faults per step",
                    flush=True,
                )
    print("\nmedian over rounds (reuse / default of the same round):")
    for b in args.batches:
        key = str(b)
        pairs = list(zip(results["reuse"], results["default"], strict=True))
        fps = statistics.median(x["runs"][key]["fps"] / y["runs"][key]["fps"] for x, y in pairs)
        init = statistics.median(y["runs"][key]["init_s"] / x["runs"][key]["init_s"] for x, y in pairs)
        diff = max(
            float(np.abs(np.asarray(x["runs"][key]["boxes"]) - np.asarray(y["runs"][key]["boxes"])).max())
            for x, y in pairs
        )
        print(
            f"B={b:<3} frames/s {fps:5.2f}x  initialisation {init:5.2f}x faster  "
            f"boxes differ by at most {diff:.1e} px"
        )


if __name__ == "__main__":
    main()
