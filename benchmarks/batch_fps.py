"""Frames per second of B sequences tracked in lockstep (``run_tracker.py --batch B``), against B = 1.

    python benchmarks/batch_fps.py [--mode runner|lockstep] [--device cpu|cuda]
                                   [--geometry super_dimp|dimp50|nce_plus_tiny]
                                   [--batches 1 4 16 64] [--sequences 128] [--frames 100] [--size 1280x720]
                                   [--per-slot 16] [--rounds 2] [--threads T] [--compile] [--tf32]
                                   [--stages] [--cuda-graph] [--distinct] [--sweep]
                                   [--variants eager graph] [--groups 1 2] [--profile] [--ops]

``--mode lockstep`` times the trackers alone: B trackers of SuperDiMP's geometry (our ``nce_plus`` network,
ResNet-50 at 352 pixels, random weights; ``super_dimp`` parameters with the thresholds of :data:`OPEN`), or
with ``--geometry nce_plus_tiny`` of the demo's network (random weights, its own parameters, :data:`OPEN`) are
initialised on the first frame of one in-memory video (``tracker_fps.make_video`` at ``--size``), advanced
one frame untimed (``--compile``: with ``compile=true``, each B's shapes compiled then), then ``--frames``
frames timed with :func:`pytracking.tracker.dimp.lockstep.track_frames`, all B on the same frame. Printed
per B: frames per second, the ratio to B = 1 of the same round, the peak GPU memory and, with ``--stages``,
the milliseconds per step of each stage. ``--stages`` synchronises the GPU around each stage, in both modes:
the host can then no longer run ahead of the device, so the frames per second of such a run are lower, and
interleaved groups cannot overlap anything. ``--distinct``: tracker i starts at frame i of the
video instead (different crops and decisions per tracker). ``--sweep``: instead of the timed frames, steps
of B, B - 1, ..., 1 trackers, twice; the first pass meets each batch size for the first time (new shapes for
cuDNN and the allocator), so the ratio of the passes shows what new shapes cost. ``--variants eager graph``:
every B runs with the eager refinement and with it replayed as a CUDA graph (``cuda_graph=true``), in
alternating order, and the summary gives each variant's ratio to the first at the same B. ``--groups 1 2``:
each variant also with the trackers of a step split into two interleaved groups (``track_frames(...,
groups=2)``: on a GPU one group's host work overlaps the other's network time), named ``eager/2``,
``graph/2``. ``--profile``: after the rounds, each variant's steps at the largest B under cProfile (Python
functions by own and by cumulative time). ``--ops``: after the rounds, the top-level tensor operations per
tracker and frame at each B (torch.profiler; what a GPU's host pays per operation, batching saves).

``--mode runner`` (default) times the whole runner:
the dataset is written once to a temporary folder in the ``folder`` layout (JPEG frames, one
``groundtruth_rect.txt`` per sequence): ``--sequences`` sequences whose lengths are spread evenly over
[F/2, 3F/2] frames (F = ``--frames``), frames of ``--size`` pixels showing a textured square that moves over
smooth noise. Every run goes through :func:`pytracking.evaluation.runner.run_dataset`, as ``run_tracker.py``
does, into a fresh results folder: frames are read from disk and decoded, results files written. B = 1 is
today's one-at-a-time runner (``track_sequence``); B > 1 the lockstep runner. ``--compile`` and ``--tf32`` set
the trackers' ``compile`` and ``tf32`` parameters, ``--cuda-graph`` their ``cuda_graph``.

The network is pytracking's ``dimpnet50`` with the seeded weights of the tracker golden files, converted
(as ``benchmarks/tracker_fps.py`` uses it), or for ``nce_plus_tiny`` the demo's network with random weights
in a checkpoint file, with the thresholds of :data:`OPEN`: on random weights every frame is then
localised, refined and learnt from, as in tracking a real target.

A run at batch B tracks the first min(N, ``--per-slot`` x B) sequences (small batches are the slow ones). Each
round runs every B once, the order reversed every other round, so that a drift of the machine's speed
falls on all alike. Printed per run: sequences, frames, wall seconds, frames per second over the wall time
(initialisations, reading and writing included), the ratio to B = 1 of the same round, the mean
initialisation seconds per sequence, the peak GPU memory, and the largest box difference from B = 1 on the
sequences both tracked; with ``--stages`` (B > 1) also the runner's seconds per stage (``start``: new
sequences' first frames and initialisations, ``read``: waiting for frames read ahead, ``write``: result
files) and the tracker's milliseconds per step. On a CUDA device the runner uses one torch thread whatever
``--threads`` says (:mod:`pytracking.evaluation.host_threads`). ``--groups 1 2``: every B > 1 also with its
steps split into two interleaved groups (``run_dataset(..., groups=2)``), named ``B=64/2``. The summary
gives the median ratios, the frames per second of the tracking steps alone (from the time files) and
what a LaSOT-test-sized run (280 sequences, 685 360 frames) would take at each B: 280 initialisations plus
the frames at the measured per-frame rate.

Both modes run with freed memory reused, as ``run_tracker.py`` runs (:mod:`ltr.admin.cpu_memory`; what that
gives on a CPU: ``benchmarks/cpu_memory.py``).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import pstats
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.tracker_fps import KWDS, OPEN, TINY, make_video, video_box  # noqa: E402
from eval.result_files import read_result_file  # noqa: E402
from ltr.admin.cpu_memory import reuse_freed_memory  # noqa: E402
from ltr.admin.import_pytracking import convert  # noqa: E402
from ltr.train_settings.dimp import SETTINGS  # noqa: E402
from pytracking.evaluation.runner import DatasetSpec, run_dataset  # noqa: E402
from pytracking.evaluation.tracker_spec import TrackerSpec, prepare_spec  # noqa: E402
from pytracking.parameter.dimp import get_parameters  # noqa: E402
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network  # noqa: E402
from pytracking.tracker.dimp.lockstep import track_frames  # noqa: E402
from pytracking.tracker.dimp.timing import NULL_TIMER, StageTimer  # noqa: E402
from tests.golden.pytracking_format import write_pytracking_checkpoint  # noqa: E402
from tests.golden.seeded import tracker_golden_weights  # noqa: E402
from tests.tracker.helpers import write_tiny_checkpoint  # noqa: E402

LASOT_SEQUENCES, LASOT_FRAMES = 280, 685_360
TRACK_STAGES = ("crop", "backbone", "classifier", "localisation", "refinement", "selection", "update")
RUNNER_STAGES = ("start", "read", "write")  # the lockstep runner's own (run_lockstep's timer)


@dataclasses.dataclass
class Run:
    batch: int
    sequences: list[str]
    frames: int
    wall_s: float
    init_s: float  # mean per sequence
    track_s: float  # per frame after the first, from the time files
    peak_gib: float | None
    folder: Path
    stages: StageTimer | None = None

    @property
    def fps(self) -> float:
        return self.frames / self.wall_s


def write_dataset(root: Path, sequences: int, frames: int, width: int, height: int) -> list[str]:
    """The folder-layout dataset (module docstring); returns the sequence names."""
    lengths = np.linspace(frames // 2, frames * 3 // 2, sequences).round().astype(int)
    names = [f"seq{i:04d}" for i in range(sequences)]

    def write(i: int) -> None:
        rng = np.random.default_rng(i)
        small = rng.integers(0, 256, (height // 16 + 1, width // 16 + 1, 3), dtype=np.uint8)
        background = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC)
        side = max(8, min(64, width // 5, height // 5))  # the moving square, inside the frame throughout
        texture = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        folder = root / names[i] / "img"
        folder.mkdir(parents=True)
        x0, y0 = width / 3, height / 3
        boxes = []
        for k in range(int(lengths[i])):
            x, y = int(x0 + width / 10 * np.sin(k / 15)), int(y0 + height / 10 * np.cos(k / 20))
            frame = background.copy()
            frame[y : y + side, x : x + side] = texture
            cv2.imwrite(str(folder / f"{k + 1:04d}.jpg"), frame, [cv2.IMWRITE_JPEG_QUALITY, 90])
            boxes.append(f"{x},{y},{side},{side}\n")
        (root / names[i] / "groundtruth_rect.txt").write_text("".join(boxes))

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(sequences)))
    return names


def run_once(
    spec: TrackerSpec,
    root: Path,
    names: list[str],
    batch: int,
    results: Path,
    stages: bool = False,
    groups: int = 1,
) -> Run:
    device = torch.device(spec.device)
    timer = StageTimer(device) if stages and batch > 1 else None
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    report = run_dataset(
        spec,
        DatasetSpec("folder", str(root)),
        results_root=results,
        sequences=names,
        batch=batch,
        groups=groups,
        progress=False,
        timer=timer,
    )
    wall = time.perf_counter() - start
    if report.failed:
        raise RuntimeError(f"B={batch}: {report.failed[0].message}\n{report.failed[0].traceback}")
    times = [np.loadtxt(report.folder / f"{n}_time.txt") for n in names]
    frames = sum(len(t) for t in times)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    return Run(
        batch,
        names,
        frames,
        wall,
        float(np.mean([t[0] for t in times])),
        float(np.sum([t[1:].sum() for t in times]) / (frames - len(times))),
        peak,
        report.folder,
        timer,
    )


def config_name(batch: int, groups: int) -> str:
    """``B=64``, or ``B=64/2`` for a run whose steps are split into 2 interleaved groups."""
    return f"B={batch}" + (f"/{groups}" if groups > 1 else "")


def stage_line(timer: StageTimer) -> str:
    """The runner's seconds per stage in all, and the tracking stages' milliseconds per step."""
    steps = timer.counts["crop"]
    runner = ", ".join(f"{k} {timer.totals[k]:.1f}" for k in RUNNER_STAGES)
    tracking = ", ".join(
        f"{k} {1000 * v / steps:.1f}" for k, v in timer.totals.items() if k not in RUNNER_STAGES
    )
    total = sum(timer.totals[k] for k in TRACK_STAGES)
    return f"{steps} steps; s in all: {runner}, tracking {total:.1f}; ms per step: {tracking}"


def box_difference(a: Run, b: Run) -> float:
    common = [n for n in a.sequences if n in b.sequences]
    return max(
        float(np.abs(read_result_file(a.folder / f"{n}.txt") - read_result_file(b.folder / f"{n}.txt")).max())
        for n in common
    )


def lockstep_mode(args: argparse.Namespace, width: int, height: int) -> None:
    """``--mode lockstep`` (module docstring)."""
    if args.geometry == "dimp50":
        raise SystemExit("--mode lockstep times --geometry super_dimp or nce_plus_tiny")
    setting = TINY if args.geometry == TINY else "nce_plus"
    loaded = random_network(setting, device=args.device)
    base = dataclasses.replace(get_parameters(args.geometry), compile=args.compile, tf32=args.tf32, **OPEN)
    # (parameters, groups of track_frames) per variant name: "eager", "graph", or either with "/G" groups
    variants = {
        v if g == 1 else f"{v}/{g}": (dataclasses.replace(base, cuda_graph=v == "graph"), g)
        for v in args.variants
        for g in args.groups
    }
    most = max(args.batches)
    offsets = list(range(most)) if args.distinct else [0] * most  # tracker i starts at frame offsets[i]
    steps = 2 * most if args.sweep else args.frames
    frames, _ = make_video(max(offsets) + steps + 2, width, height)
    cuda = torch.device(args.device).type == "cuda"
    name = torch.cuda.get_device_name() if cuda else "CPU"
    print(
        f"lockstep, {args.geometry} geometry on {name}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads, {'distinct videos' if args.distinct else 'one video'}"
    )

    def start(b: int, params: DiMPParams, groups: int) -> Callable[..., None]:
        """B trackers initialised; returns step(k, n[, timer]): the first n advance to frame k of their videos."""
        trackers = [DiMPTracker(loaded.net, loaded.geometry, params) for _ in range(b)]
        for t, o in zip(trackers, offsets, strict=False):
            t.initialize(frames[o], video_box(o))

        def step(k: int, n: int, timer: StageTimer = NULL_TIMER) -> None:
            track_frames(trackers[:n], [frames[o + k] for o in offsets[:n]], timer=timer, groups=groups)

        step(1, b)  # untimed; compiles B's shapes with --compile, captures B's graph with --variants graph
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        return step

    fps: dict[tuple[int, str], list[float]] = {(b, v): [] for b in args.batches for v in variants}
    for r in range(args.rounds):
        order = sorted(args.batches) if r % 2 == 0 else sorted(args.batches, reverse=True)
        for b in order:
            for v in variants if r % 2 == 0 else list(reversed(variants)):
                step = start(b, *variants[v])
                if args.sweep:
                    sweep(step, b, cuda)
                    continue
                timer = StageTimer(args.device) if args.stages else NULL_TIMER
                begin = time.perf_counter()
                for k in range(2, 2 + args.frames):
                    step(k, b, timer)
                if cuda:
                    torch.cuda.synchronize()
                fps[b, v].append(args.frames * b / (time.perf_counter() - begin))
                peak = f"{torch.cuda.max_memory_allocated() / 2**30:.2f} GiB" if cuda else "-"
                line = f"round {r + 1}  B={b:<3} {v:<7} {fps[b, v][-1]:7.1f} FPS  peak {peak}"
                if args.stages:
                    line += "  ms per step: " + ", ".join(
                        f"{k} {1000 * t / args.frames:.1f}" for k, t in timer.totals.items()
                    )
                print(line, flush=True)
    if args.profile:
        for v in variants:
            profile_steps(start(most, *variants[v]), most, args.frames, v)
    if args.ops:
        for v in variants:
            count_ops({b: start(b, *variants[v]) for b in sorted(args.batches)}, args.frames, v)
    if args.sweep:
        return
    print("\nmedian over rounds:")
    first = next(iter(variants))
    for b in sorted(args.batches):
        for v in variants:
            ratio = statistics.median(x / y for x, y in zip(fps[b, v], fps[1, v], strict=True))
            line = f"B={b:<3} {v:<7} {statistics.median(fps[b, v]):7.1f} FPS  {ratio:5.2f}x B=1"
            if v != first:
                against = statistics.median(x / y for x, y in zip(fps[b, v], fps[b, first], strict=True))
                line += f"  {against:5.2f}x {first}"
            print(line)


def profile_steps(step: Callable[..., None], b: int, frames: int, variant: str) -> None:
    """``--profile``: the host's Python functions over ``frames`` steps of ``b`` trackers (cProfile), by own
    and by cumulative time; on a GPU the time a function waits for the device counts as its own."""
    profiler = cProfile.Profile()
    profiler.enable()
    for k in range(2, 2 + frames):
        step(k, b)
    profiler.disable()
    print(f"\nprofile, B={b} {variant}, {frames} steps:", flush=True)
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def count_ops(steps: dict[int, Callable[..., None]], frames: int, variant: str) -> None:
    """``--ops``: the top-level tensor operations (ATen calls not made by another ATen call; torch.profiler,
    CPU activity) per tracker and frame over ``frames`` steps at each B, with the ratio to B = 1 and each
    B's most frequent operations. On a GPU every such call costs the host microseconds whatever the size of
    its tensors, so their number per tracker is what batching the per-frame rules saves."""
    from torch.profiler import ProfilerActivity, profile

    per_tracker: dict[int, float] = {}
    for b, step in steps.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for k in range(2, 2 + frames):
                step(k, b)
        names: Counter[str] = Counter()
        for event in prof.events():
            parent = event.cpu_parent
            while parent is not None and not parent.name.startswith("aten::"):
                parent = parent.cpu_parent
            if event.name.startswith("aten::") and parent is None:
                names[event.name] += 1
        per_tracker[b] = sum(names.values()) / (frames * b)
        common = ", ".join(
            f"{n.removeprefix('aten::')} {c / (frames * b):.1f}" for n, c in names.most_common(8)
        )
        print(
            f"ops, B={b:<3} {variant:<7} {per_tracker[b]:6.1f} per tracker and frame  "
            f"{per_tracker[b] / per_tracker[min(steps)]:5.2f}x B=1  most: {common}",
            flush=True,
        )


def sweep(step: Callable[[int, int], None], b: int, cuda: bool) -> None:
    """``--sweep``: steps of b, b - 1, ..., 1 trackers, twice; the first pass meets each batch size after the
    untimed step at b for the first time (new shapes for cuDNN and the allocator), the second pass again."""
    passes = []
    for p in range(2):
        times = []
        for i, n in enumerate(range(b, 0, -1)):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            step(2 + p * b + i, n)
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        passes.append(times)
    first, second = (np.array(t) for t in passes)
    print(
        f"sweep B={b}: steps of {b}..1 trackers, first pass {first.sum():.2f} s, second pass {second.sum():.2f} s "
        f"({first.sum() / second.sum():.2f}x); per step, median ratio first/second "
        f"{np.median(first / second):.2f}, largest {np.max(first / second):.2f} (at {b - int(np.argmax(first / second))})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["runner", "lockstep"], default="runner")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--geometry", choices=[*sorted(KWDS), TINY], default="super_dimp")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--sequences", type=int, default=128)
    ap.add_argument(
        "--frames", type=int, default=100, help="runner: mean sequence length; lockstep: timed frames"
    )
    ap.add_argument("--size", default="1280x720", help="frame size WxH")
    ap.add_argument("--per-slot", type=int, default=16, help="batch B tracks up to this x B sequences")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    ap.add_argument("--compile", action="store_true", help="the trackers with compile=true")
    ap.add_argument(
        "--tf32", action="store_true", help="the trackers with tf32=true (CUDA convolutions in TF32)"
    )
    ap.add_argument("--distinct", action="store_true", help="lockstep: tracker i starts at frame i")
    ap.add_argument(
        "--sweep", action="store_true", help="lockstep: time steps of B..1 trackers twice (new shapes)"
    )
    ap.add_argument(
        "--stages",
        action="store_true",
        help="seconds per stage; synchronises the device around each stage, which lowers the frames per second",
    )
    ap.add_argument(
        "--cuda-graph",
        action="store_true",
        help="runner: the trackers with cuda_graph=true (refinement graph)",
    )
    ap.add_argument(
        "--variants",
        nargs="+",
        choices=["eager", "graph"],
        default=["eager"],
        help="lockstep: the trackers' refinement, eager and/or replayed as a CUDA graph (cuda_graph=true), "
        "interleaved; ratios against the first",
    )
    ap.add_argument(
        "--groups",
        type=int,
        nargs="+",
        default=[1],
        help="each variant (lockstep) or each B > 1 (runner) also with its trackers in G interleaved groups "
        "(track_frames' groups)",
    )
    ap.add_argument("--profile", action="store_true", help="lockstep: cProfile the largest B's steps")
    ap.add_argument(
        "--ops",
        action="store_true",
        help="lockstep: top-level tensor operations per tracker and frame at each B",
    )
    args = ap.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    if 1 not in args.batches:
        ap.error("--batches must include 1 (the baseline)")
    if args.threads:
        torch.set_num_threads(args.threads)
    reuse_freed_memory()  # as run_tracker.py does (benchmarks/cpu_memory.py measures it)
    if args.mode == "lockstep":
        lockstep_mode(args, width, height)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        names = write_dataset(folder / "data", args.sequences, args.frames, width, height)
        if args.geometry == TINY:
            seed = 0
            ckpt = write_tiny_checkpoint(folder / "net.pth.tar", crop_size=SETTINGS[TINY]().data.crop_size)
        else:
            seed, state = tracker_golden_weights(args.geometry)
            src = write_pytracking_checkpoint(folder / "src.pth.tar", state, KWDS[args.geometry])
            ckpt = convert(src, folder / "net.pth.tar", args.geometry)
        runtime = {"compile": args.compile, "tf32": args.tf32, "cuda_graph": args.cuda_graph}
        overrides = tuple(f"{k}={v}" for k, v in {**OPEN, "seed": seed, **runtime}.items())
        spec = TrackerSpec(
            "dimp", args.geometry, str(ckpt), args.device, overrides=overrides, name_in_results="bench"
        )
        spec, _ = prepare_spec(spec)
        name = torch.cuda.get_device_name() if spec.device.startswith("cuda") else "CPU"
        print(
            f"{args.geometry} on {name} ({spec.device}), torch {torch.__version__}, {torch.get_num_threads()} "
            f"threads; {args.sequences} sequences of {args.frames // 2}-{args.frames * 3 // 2} frames "
            f"{width}x{height} (written in {time.perf_counter() - start:.0f} s); B tracks {args.per_slot} x B",
            flush=True,
        )
        # warm-up: the device's kernels and allocator, one short sequence at the largest batch; --compile: B
        # sequences at every batch B, so that its padded crops and the refinement's sizes as sequences end
        # (1..B trackers) are compiled before the timed runs
        warmups = [(b, b) for b in args.batches] if args.compile else [(max(args.batches), 1)]
        for b, sequences in warmups:
            run_once(spec, folder / "data", names[:sequences], b, folder / f"warmup{b}")
        # (B, groups) per run: B = 1 alone, every larger B with each of --groups
        configs = [(b, g) for b in sorted(args.batches) for g in (args.groups if b > 1 else [1])]
        runs: dict[tuple[int, int], list[Run]] = {c: [] for c in configs}
        for r in range(args.rounds):
            for b, g in configs if r % 2 == 0 else configs[::-1]:
                results = folder / f"r{r}_b{b}_g{g}"
                run = run_once(spec, folder / "data", names[: args.per_slot * b], b, results, args.stages, g)
                runs[b, g].append(run)
                peak = f"{run.peak_gib:.1f} GiB" if run.peak_gib is not None else "-"
                line = (
                    f"round {r + 1}  {config_name(b, g):<7} {len(run.sequences):4d} seq {run.frames:6d} frames "
                    f"{run.wall_s:7.1f} s  {run.fps:7.1f} FPS  init {run.init_s:.3f} s/seq  "
                    f"{1 / run.track_s:7.1f} FPS tracking  peak {peak}"
                )
                if b != 1 and len(runs[1, 1]) > r:
                    line += f"  boxes within {box_difference(run, runs[1, 1][r]):.2g} px of B=1"
                print(line, flush=True)
                if run.stages is not None:
                    print(f"    {stage_line(run.stages)}", flush=True)
        print("\nmedian over rounds (ratio to B=1 of the same round):")
        for b, g in configs:
            base = runs[1, 1]
            ratio = statistics.median(r.fps / one.fps for r, one in zip(runs[b, g], base, strict=True))
            fps = statistics.median(r.fps for r in runs[b, g])
            init = statistics.median(r.init_s for r in runs[b, g])
            per_frame = statistics.median(r.track_s for r in runs[b, g])
            lasot_h = (LASOT_SEQUENCES * init + (LASOT_FRAMES - LASOT_SEQUENCES) * per_frame) / 3600
            print(
                f"{config_name(b, g):<7} {fps:7.1f} FPS  {ratio:5.2f}x B=1  {1 / per_frame:7.1f} FPS tracking  "
                f"LaSOT-test-sized run ~{lasot_h:.2f} h"
            )


if __name__ == "__main__":
    main()
