"""Tracker speed: initialisation time, frames per second and a per-stage breakdown, random weights.

python benchmarks/tracker_fps.py [--param nce_plus|nce_plus_tiny|...] [--device cpu|cuda]
                                 [--geometry setting|dimp50] [--frames 30] [--threads 2] [--runs 1]
                                 [--no-channels-last]
                                 [--compare-full-maps] [--compare-unfolded] [--compare-no-graph] [--compare-no-grad]
                                 [--compare-no-kernels]
                                 [--compile]
                                 [--int8] [--flops] [--profile]

Tracks a generated 640x480 video (a textured square moving over a noise background) with a network of the
parameter set's train setting built with random weights (``pretrained=False``), so it needs no checkpoint and
no download. ``--geometry dimp50`` switches to DiMP-50's geometry (288-pixel crops, search area factor 5,
replicate border) and its 5 box-refinement steps (pytracking's ``dimp50`` parameters; SuperDiMP takes 10)
instead of the setting's (SuperDiMP: 352 pixels, factor 6, 10 steps).

Stages (synchronised per stage when timing on a GPU): crop, backbone, classifier, localisation, refinement,
update. On a GPU the same frames are also tracked without the stage timer ("free-running": the only
synchronisation is the frame's read of the output box), which is the frame rate users see. Printed against the reference pytracking implementation measured on this project's 2-core CPU
machine (issue 5): SuperDiMP geometry 3.4 FPS, 295 ms/frame, box refinement 140 ms, initialisation 4.0 s;
DiMP-50 geometry 5.0 FPS, 194 ms/frame, refinement 83 ms. Those figures are CPU figures: compare ratios
only for ``--device cpu --threads 2`` runs, and in one session (timings vary +-20% on a shared machine).
The non-backbone share of the frame time is the part this project controls (target < 30%).
``--flops`` counts each stage's products (convolutions, matrix products) over 20 frames: the non-backbone
share of the arithmetic, which no implementation of these network heads goes below at the backbone's speed
per FLOP. ``--compile`` times the tracker with ``params.compile`` (torch.compile of the per-frame backbone and
classifier features, compiled before the timed frames) after the eager one in the same process. ``--int8``
times the tracker with ``params.int8_heads`` (the heads' per-frame convolutions in int8,
:mod:`pytracking.tracker.dimp.int8`) after the same tracker with float32 heads, in the same process.
``--runs N`` times the tracker N times (with ``--int8``, alternated with the float32 one) and prints each
run's frame time and the medians.
``--box-channels C`` builds the box head C channels wide instead of the setting's (its modulated maps and
per-box Linear layers, ``box_mod_channels`` and ``box_linear_channels``; the paper's is 256): what a narrower
head than the paper's would save, untrained, so nothing about its accuracy.
``--compare-unfolded`` also times, in the same process and first, the network with its BatchNorm layers kept
(the tracker folds them into the convolutions, :mod:`ltr.models.fold_bn`). ``--compare-full-maps`` also
times, in the same process and first, the same tracker with the box head's test features on the whole maps
(``refine_window=None``, what the reference trackers compute) and prints the ratio. ``--compare-no-graph``
(CUDA) also times, after the main run, the tracker without the refinement's CUDA graph
(``cuda_graph=False``). ``--compare-no-grad`` also times, alternated with every run, the same tracker with
``initialize`` and ``track`` under ``torch.no_grad`` instead of ``torch.inference_mode`` (what they ran under
before 2026-11-23). ``--compare-no-kernels`` also times, alternated with every run, the same tracker with
the CPU's C++ kernels switched off (the box pooling of :mod:`ltr.ops.box_pool_kernel` and the int8 input
quantisation of :mod:`ltr.ops.quantize_kernel`), i.e. their PyTorch paths. ``--profile`` counts the
operators (and on CUDA the device kernels and the device's busy time) per frame with ``torch.profiler``: on a
GPU, a frame whose busy time is far below its wall time is bound by the host launching kernels. The
localisation thresholds are opened so that every frame runs refinement and the memory update (the normal
state); the filter optimiser runs every 20th frame as in tracking.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from ltr.models.box_score_grad import BOX_BINS
from ltr.models.tracking import DiMPNet
from ltr.ops import box_pool_kernel, quantize_kernel
from pytracking.parameter.dimp import NAMES, get_parameters
from pytracking.tracker.dimp import DiMPParams, DiMPTracker, random_network
from pytracking.tracker.dimp.params import Geometry
from pytracking.tracker.dimp.timing import StageTimer

REFERENCE = {  # reference pytracking on the project's 2-core CPU machine (issue 5)
    "superdimp": {"fps": 3.4, "frame_ms": 295.0, "refine_ms": 140.0, "init_s": 4.0},
    "dimp50": {"fps": 5.0, "frame_ms": 194.0, "refine_ms": 83.0, "init_s": None},
}
STAGES = ("crop", "backbone", "classifier", "localisation", "refinement", "update")


@contextmanager
def kernels_off() -> Iterator[None]:
    """The C++ kernels reported unavailable (their callers take the PyTorch paths) while in the block."""
    saved = box_pool_kernel.available, quantize_kernel.available
    box_pool_kernel.available = quantize_kernel.available = lambda: False
    try:
        yield
    finally:
        box_pool_kernel.available, quantize_kernel.available = saved


class NoGradTracker(DiMPTracker):
    """The tracker with ``initialize`` and ``track`` under ``torch.no_grad`` instead of
    ``torch.inference_mode``: ``--compare-no-grad``'s baseline."""

    initialize = torch.no_grad()(DiMPTracker.initialize.__wrapped__)  # type: ignore[attr-defined]
    track = torch.no_grad()(DiMPTracker.track.__wrapped__)  # type: ignore[attr-defined]


def setting_box_widths(params: DiMPParams) -> str:
    """The box head widths (modulated maps, per-box features) of the parameters' train setting, as text."""
    from ltr.train_settings.dimp import SETTINGS

    net = SETTINGS[params.train_setting]().net
    return f"maps {net.box_mod_channels}, per-box features {net.box_linear_channels}"


def make_video(num_frames: int, width: int = 640, height: int = 480, seed: int = 0):
    """Frames (H, W, 3) uint8 and the initial xywh box of a textured square moving on a noise background."""
    rng = np.random.default_rng(seed)
    background = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    texture = rng.integers(0, 255, (60, 60, 3), dtype=np.uint8)
    frames = []
    for i in range(num_frames):
        frame = np.roll(background, 2 * i, axis=1).copy()
        x, y = 200 + 4 * i % 300, 150 + 2 * i % 200
        frame[y : y + 60, x : x + 60] = texture
        frames.append(frame)
    return frames, np.array([200.0, 150.0, 60.0, 60.0])


class StageFlops:
    """A tracker timer that counts floating-point operations per stage instead of seconds.

    ``torch.utils.flop_counter.FlopCounterMode`` counts the products (convolutions, matrix products; 2 per
    multiply-accumulate), not the element-wise work: the arithmetic a stage cannot avoid at the network's
    size, whatever the implementation.
    """

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        counter = FlopCounterMode(display=False)
        with counter:
            yield
        self.totals[name] = self.totals.get(name, 0.0) + counter.get_total_flops()


def count_flops(
    net: DiMPNet, geometry: Geometry, params: DiMPParams, frames: list[np.ndarray], init: np.ndarray
) -> dict[str, float]:
    """GFLOP per frame and stage over ``frames[1:]`` (eager: the counter sees every product)."""
    counter = StageFlops()
    tracker = DiMPTracker(net, geometry, dataclasses.replace(params, compile=False), timer=counter)  # type: ignore[arg-type]
    tracker.initialize(frames[0], init)
    for f in frames[1:]:
        tracker.track(f)
    return {s: counter.totals.get(s, 0.0) / (len(frames) - 1) / 1e9 for s in STAGES}


class Measure:
    """Times a tracker parameter set on one video: (init s, ms/frame, {stage: ms/frame})."""

    def __init__(
        self,
        net: DiMPNet,
        geometry: Geometry,
        frames: list[np.ndarray],
        init: np.ndarray,
        warmup: int,
        num_frames: int,
        device: torch.device,
    ) -> None:
        self.net, self.geometry, self.frames, self.init = net, geometry, frames, init
        self.warmup, self.num_frames, self.device = warmup, num_frames, device

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def __call__(
        self, params: DiMPParams, tracker_class: type[DiMPTracker] = DiMPTracker
    ) -> tuple[float, float, dict[str, float]]:
        timer = StageTimer(self.device)
        tracker = tracker_class(self.net, self.geometry, params, timer=timer)
        frames = self.frames
        # warm-up initialisation (first-call allocations), then the timed one
        tracker.initialize(frames[0], self.init)
        self._sync()
        start = time.perf_counter()
        tracker.initialize(frames[0], self.init)
        self._sync()
        init_s = time.perf_counter() - start
        for f in frames[1 : 1 + self.warmup]:
            tracker.track(f)
        timer.reset()
        frame_ms = self._timed_frames(tracker)
        stage_ms = {s: timer.totals.get(s, 0.0) / self.num_frames * 1000 for s in STAGES}
        return init_s, frame_ms, stage_ms

    def free_running(self, params: DiMPParams) -> float:
        """ms/frame of the tracker as it runs for users: no stage timer, so no synchronisation per stage.

        On a GPU the stage timer's synchronisations stop the host from queueing the next stage while the device
        works, so the timed frame is slower than tracking; this is the frame rate a user sees (one host read
        of the output box per frame). On a CPU the two agree.
        """
        tracker = DiMPTracker(self.net, self.geometry, params)
        tracker.initialize(self.frames[0], self.init)
        for f in self.frames[1 : 1 + self.warmup]:
            tracker.track(f)
        return self._timed_frames(tracker)

    def _timed_frames(self, tracker: DiMPTracker) -> float:
        """ms/frame of ``tracker`` over the frames after the warm-up, the device drained before and after."""
        self._sync()
        start = time.perf_counter()
        for f in self.frames[1 + self.warmup :]:
            tracker.track(f)
        self._sync()
        return (time.perf_counter() - start) / self.num_frames * 1000


def profile_frames(
    net: DiMPNet, geometry: Geometry, params: DiMPParams, frames: list[np.ndarray], init: np.ndarray, device
) -> tuple[float, float, float]:
    """(operators, device kernels, summed kernel ms) per frame over ``frames[11:]`` (torch.profiler), after 10
    untimed frames: how many operations a frame dispatches and, on a GPU, how long the device is busy."""
    from torch.profiler import ProfilerActivity, profile

    tracker = DiMPTracker(net, geometry, params)
    tracker.initialize(frames[0], init)
    for f in frames[1:11]:
        tracker.track(f)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        for f in frames[11:]:
            tracker.track(f)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    n = len(frames) - 11
    events = prof.events()
    cpu_type = torch.autograd.DeviceType.CPU
    ops = sum(1 for e in events if e.device_type == cpu_type and e.name.startswith("aten::"))
    kernels = [e for e in events if e.device_type != cpu_type]
    busy_ms = sum(e.device_time for e in kernels) / 1000
    return ops / n, len(kernels) / n, busy_ms / n


def print_non_backbone_ratio(
    baseline: tuple[float, float, dict[str, float]],
    what: str,
    faster: str,
    frame_ms: float,
    stage_ms: dict[str, float],
) -> None:
    """One line: an in-process baseline run (init s, ms/frame, {stage: ms}) against this tracker's frame,
    non-backbone and refinement times."""
    b_frame, b_stage = baseline[1], baseline[2]
    b_other = b_frame - b_stage["backbone"]
    print(
        f"against the same tracker {what}, this process: {b_frame:.1f} ms/frame, non-backbone {b_other:.1f} "
        f"ms (share {b_other / b_frame:.1%}), refinement {b_stage['refinement']:.1f} ms; ratio > 1 = {faster} "
        f"faster: frame {b_frame / frame_ms:.2f}x, non-backbone "
        f"{b_other / max(frame_ms - stage_ms['backbone'], 1e-9):.2f}x, refinement "
        f"{b_stage['refinement'] / max(stage_ms['refinement'], 1e-9):.2f}x"
    )


def median_run(results: list[tuple[float, float, dict[str, float]]]) -> tuple[float, float, dict[str, float]]:
    """The median of each quantity (init s, ms/frame, each stage's ms/frame) over runs of :class:`Measure`."""
    stages = {s: statistics.median(r[2][s] for r in results) for s in results[0][2]}
    return statistics.median(r[0] for r in results), statistics.median(r[1] for r in results), stages


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--param", default="nce_plus", choices=NAMES)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--geometry", default="setting", choices=("setting", "dimp50"))
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--runs",
        type=int,
        default=1,
        help="time the tracker this many times (alternated with --int8's float32 baseline) and report the "
        "medians",
    )
    ap.add_argument("--no-channels-last", dest="channels_last", action="store_false")
    ap.add_argument(
        "--compare-full-maps",
        action="store_true",
        help="also time refine_window=None (box-head features on the whole maps) in this process",
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the per-frame backbone and classifier features (params.compile); the eager "
        "tracker is timed first in this process as the baseline",
    )
    ap.add_argument(
        "--int8",
        action="store_true",
        help="run the heads' per-frame convolutions in int8 (params.int8_heads, CPU); the same tracker with "
        "float32 heads is timed in this process as the baseline",
    )
    ap.add_argument(
        "--flops",
        action="store_true",
        help="also count the products (GFLOP) of every stage over 20 frames (one filter optimisation): the "
        "arithmetic floor of the non-backbone share",
    )
    ap.add_argument(
        "--compare-no-grad",
        action="store_true",
        help="also time the tracker under torch.no_grad instead of inference_mode, alternated with each run",
    )
    ap.add_argument(
        "--compare-no-kernels",
        action="store_true",
        help="also time the tracker with the C++ kernels off (box pooling, int8 quantisation; their PyTorch "
        "paths), alternated with each run",
    )
    ap.add_argument(
        "--compare-no-graph",
        action="store_true",
        help="on CUDA, also time the tracker without the refinement's CUDA graph (params.cuda_graph=False, "
        "whole maps) in this process",
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also count, with torch.profiler over 20 frames, the operators and device kernels a frame "
        "dispatches and the device's busy time per frame (and for --compare-no-graph's tracker)",
    )
    ap.add_argument(
        "--box-channels",
        type=int,
        default=None,
        help="box head width (modulated maps and per-box Linear layers; the paper's is 256)",
    )
    ap.add_argument(
        "--compare-unfolded",
        action="store_true",
        help="also time the network with its BatchNorm layers kept (not folded into the convolutions)",
    )
    args = ap.parse_args()
    if args.runs < 1:
        ap.error(f"--runs must be at least 1, got {args.runs}")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    # random weights give low scores (the state would be "not found" and skip refinement and learning): the
    # thresholds are opened so that every frame takes the full path (refinement + memory update)
    params = dataclasses.replace(
        get_parameters(args.param),
        channels_last=args.channels_last,
        target_not_found_threshold=-1e9,
        distractor_threshold=1e9,
        hard_negative_threshold=1e9,
    )
    data = {}
    if args.geometry == "dimp50":
        data = {"crop_size": 288, "search_area_factor": 5.0, "crop_mode": "replicate"}
        # and DiMP-50's iteration count: pytracking's dimp50 parameters refine boxes in 5 steps (SuperDiMP 10),
        # which is what the reference figure below was measured with
        params = dataclasses.replace(params, refine_iters=5)
    box_fields = {}
    if args.box_channels is not None:
        if args.box_channels < 1:
            ap.error(f"--box-channels must be positive, got {args.box_channels}")
        box_fields = {
            "box_mod_channels": (args.box_channels,) * 2,
            "box_linear_channels": (args.box_channels,) * 2,
        }
    loaded = random_network(params.train_setting, device, net_fields=box_fields, **data)
    geo = loaded.geometry
    frames, init = make_video(args.warmup + args.frames + 1)
    run = Measure(loaded.net, geo, frames, init, args.warmup, args.frames, device)
    unfolded = None
    if args.compare_unfolded:
        # in-process baseline: the same weights with the BatchNorm layers kept (same seed, not folded)
        plain = random_network(params.train_setting, device, fold_bn=False, net_fields=box_fields, **data)
        unfolded = Measure(plain.net, geo, frames, init, args.warmup, args.frames, device)(params)
    baseline = None
    if args.compare_full_maps and params.refine and params.refine_window is not None:
        # in-process baseline: box-head features on the whole maps, as the reference trackers compute them
        baseline = run(dataclasses.replace(params, refine_window=None))
    if args.int8:
        params = dataclasses.replace(params, int8_heads=True)
    eager = None
    eager_free = None
    compile_s = 0.0
    if args.compile:
        eager = run(params)  # the in-process baseline
        eager_free = run.free_running(params) if device.type == "cuda" else None
        params = dataclasses.replace(params, compile=True)
        # compile outside the timed frames: the first tracked frame builds both compiled stages
        tracker = DiMPTracker(loaded.net, geo, params)
        tracker.initialize(frames[0], init)
        start = time.perf_counter()
        tracker.track(frames[1])
        compile_s = time.perf_counter() - start
    # in-process baseline for --int8: the same tracker (compiled if --compile) with float32 heads; --runs
    # alternates the two (this machine's speed drifts within seconds) and keeps each quantity's median
    float_runs, no_grad_runs, no_kernel_runs, runs = [], [], [], []
    for _ in range(args.runs):
        if args.int8:
            float_runs.append(run(dataclasses.replace(params, int8_heads=False)))
        if args.compare_no_grad:
            no_grad_runs.append(run(params, NoGradTracker))
        if args.compare_no_kernels:
            with kernels_off():
                no_kernel_runs.append(run(params))
        runs.append(run(params))
    float_heads = median_run(float_runs) if float_runs else None
    no_grad = median_run(no_grad_runs) if no_grad_runs else None
    no_kernels = median_run(no_kernel_runs) if no_kernel_runs else None
    graphed = params.refines_in_graph(device.type)
    init_s, frame_ms, stage_ms = median_run(runs)
    if args.runs > 1:

        def shares(results: list) -> str:
            return ", ".join(f"{1 - r[2]['backbone'] / r[1]:.1%}" for r in results)

        print(f"{args.runs} runs, ms/frame: " + ", ".join(f"{r[1]:.1f}" for r in runs), end="")
        print(f" (non-backbone share {shares(runs)})", end="")
        if float_runs:
            print("; float32 heads: " + ", ".join(f"{r[1]:.1f}" for r in float_runs), end="")
            print(f" (share {shares(float_runs)})", end="")
        if no_grad_runs:
            print("; under no_grad: " + ", ".join(f"{r[1]:.1f}" for r in no_grad_runs), end="")
        if no_kernel_runs:
            print("; without the C++ kernels: " + ", ".join(f"{r[1]:.1f}" for r in no_kernel_runs), end="")
            print(f" (share {shares(no_kernel_runs)})", end="")
        print(" (medians of every quantity below)")
    fps = 1000 / frame_ms
    free_ms = run.free_running(params) if device.type == "cuda" else None
    no_graph = None
    if args.compare_no_graph and device.type == "cuda":
        eager_refine = dataclasses.replace(params, cuda_graph=False, refine_window=None)
        no_graph = run(eager_refine), run.free_running(eager_refine)

    ref_key = "dimp50" if args.geometry == "dimp50" else ("superdimp" if geo.crop_size == 352 else None)
    print(
        f"param {args.param} ({params.train_setting} network, random weights), device {device}, "
        f"torch threads {args.threads}, channels_last {args.channels_last}, compiled {params.compile}, "
        f"int8 heads {params.int8_heads}, "
        f"refinement as a CUDA graph {graphed}"
    )
    box = loaded.net.box_head
    print(
        f"box head: {box.box_fc2.linear.out_features} + {box.box_fc3.linear.out_features} per-box features, "
        f"maps of {box.box_fc2.linear.in_features // BOX_BINS[0] ** 2} + "
        f"{box.box_fc3.linear.in_features // BOX_BINS[1] ** 2} channels"
        + (
            ""
            if args.box_channels is None
            else f" (--box-channels; the setting's: {setting_box_widths(params)})"
        )
    )
    print(
        f"geometry: crop {geo.crop_size} px, search area factor {geo.search_area_factor}, mode {geo.crop_mode}; "
        f"refinement {params.refine_mode if params.refine else 'off'}, {params.refine_iters} steps, "
        f"{1 + params.num_random_boxes} boxes"
    )
    print(f"init: {init_s:.3f} s   frames: {args.frames}   {frame_ms:.1f} ms/frame   {fps:.2f} FPS")
    print("stage          ms/frame  share")
    for s in STAGES:
        print(f"  {s:<12} {stage_ms[s]:8.1f}  {stage_ms[s] / frame_ms:6.1%}")
    other = frame_ms - sum(stage_ms.values())
    print(f"  {'(rest)':<12} {other:8.1f}  {other / frame_ms:6.1%}")
    non_backbone = 1 - stage_ms["backbone"] / frame_ms
    print(f"non-backbone share of the frame time: {non_backbone:.1%} (target < 30%)")
    if free_ms is not None:
        print(
            f"free-running (no stage timer, one host read per frame): {free_ms:.1f} ms/frame   "
            f"{1000 / free_ms:.2f} FPS   (the stage-timed frames above synchronise the device before and after every stage)"
        )
    if args.profile:
        variants = [("this tracker", params)]
        if no_graph is not None:
            variants.append(("without the CUDA graph", eager_refine))
        pframes, pinit = make_video(31)
        for label, variant in variants:
            ops, kernels, busy = profile_frames(loaded.net, geo, variant, pframes, pinit, device)
            line = f"profile, {label}: {ops:.0f} aten operators per frame"
            if device.type == "cuda":
                line += f", {kernels:.0f} device kernels per frame, device busy {busy:.2f} ms per frame"
            print(line)
    if args.flops:
        flops = count_flops(loaded.net, geo, params, frames[:21], init)
        total = sum(flops.values())
        print("products per frame (GFLOP; 2 per multiply-accumulate), stage: GFLOP  share of the products")
        print(
            "  " + ", ".join(f"{s} {flops[s]:.2f} ({flops[s] / total:.0%})" for s in STAGES if flops[s] > 0)
        )
        print(
            f"non-backbone share of the products: {1 - flops['backbone'] / total:.1%}; at the backbone's speed "
            f"per GFLOP the non-backbone work alone would take {1 - flops['backbone'] / total:.1%} of the frame"
        )
    # the window and folding baselines ran eagerly: compare them with the eager run
    own_frame, own_stage = (eager[1], eager[2]) if eager is not None else (frame_ms, stage_ms)
    if baseline is not None:
        b_init, b_frame, b_stage = baseline
        print(
            f"against the same tracker with box-head features on the whole maps (refine_window=None), "
            f"this process: {b_frame:.1f} ms/frame, refinement {b_stage['refinement']:.1f} ms; "
            f"ratio > 1 = the window is faster: frame {b_frame / own_frame:.2f}x, "
            f"refinement {b_stage['refinement'] / max(own_stage['refinement'], 1e-9):.2f}x"
        )
    if float_heads is not None:
        f_init, f_frame, f_stage = float_heads
        f_share = 1 - f_stage["backbone"] / f_frame
        print(
            f"against the same tracker with float32 heads (int8_heads=False), this process: {f_frame:.1f} "
            f"ms/frame, classifier {f_stage['classifier']:.1f} ms, refinement "
            f"{f_stage['refinement']:.1f} ms, non-backbone share {f_share:.1%}; ratio > 1 = int8 is faster: "
            f"frame {f_frame / frame_ms:.2f}x, "
            f"classifier {f_stage['classifier'] / max(stage_ms['classifier'], 1e-9):.2f}x, refinement "
            f"{f_stage['refinement'] / max(stage_ms['refinement'], 1e-9):.2f}x"
        )
    for baseline_run, what, faster in (
        (no_grad, "under torch.no_grad (not inference_mode)", "inference_mode is"),
        (no_kernels, "without the C++ kernels (their PyTorch paths)", "the kernels are"),
    ):
        if baseline_run is not None:
            print_non_backbone_ratio(baseline_run, what, faster, frame_ms, stage_ms)
    if eager is not None:
        e_init, e_frame, e_stage = eager
        print(
            f"against the same tracker eager (not compiled), this process: {e_frame:.1f} ms/frame, backbone "
            f"{e_stage['backbone']:.1f} ms, classifier {e_stage['classifier']:.1f} ms; ratio > 1 = compiled is "
            f"faster: frame {e_frame / frame_ms:.2f}x (compilation on the first frame: {compile_s:.1f} s)"
        )
        if eager_free is not None and free_ms is not None:
            print(
                f"  free-running: eager {eager_free:.1f} ms/frame ({1000 / eager_free:.2f} FPS), compiled "
                f"{free_ms:.1f} ms/frame ({1000 / free_ms:.2f} FPS), ratio {eager_free / free_ms:.2f}x"
            )
    if no_graph is not None:
        (_, g_frame, g_stage), g_free = no_graph
        print(
            f"against the same tracker without the refinement's CUDA graph (whole maps), this process: "
            f"{g_frame:.1f} ms/frame, refinement {g_stage['refinement']:.1f} ms, free-running {g_free:.1f} "
            f"ms/frame; ratio > 1 = the graph is faster: free-running frame {g_free / free_ms:.2f}x, "
            f"refinement {g_stage['refinement'] / max(stage_ms['refinement'], 1e-9):.2f}x"
        )
    if unfolded is not None:
        u_init, u_frame, u_stage = unfolded
        print(
            f"against the same network with its BatchNorm layers not folded, this process: {u_frame:.1f} "
            f"ms/frame, backbone {u_stage['backbone']:.1f} ms; ratio > 1 = folding is faster: frame "
            f"{u_frame / own_frame:.2f}x, backbone {u_stage['backbone'] / max(own_stage['backbone'], 1e-9):.2f}x"
        )
    if ref_key is None:
        print("no reference figures for this geometry (the reference numbers are for 352 px and 288 px)")
        return
    ref = REFERENCE[ref_key]
    print(f"against reference pytracking ({ref_key} geometry, 2-core CPU; ratio > 1 = we are faster):")
    print(f"  FPS             {fps:7.2f} vs {ref['fps']:6.2f}    ratio {fps / ref['fps']:.2f}")
    print(
        f"  ms/frame        {frame_ms:7.1f} vs {ref['frame_ms']:6.1f}    ratio {ref['frame_ms'] / frame_ms:.2f}"
    )
    r = stage_ms["refinement"]
    print(
        f"  refinement ms   {r:7.1f} vs {ref['refine_ms']:6.1f}    ratio {ref['refine_ms'] / max(r, 1e-9):.2f}"
    )
    if ref["init_s"] is not None:
        print(
            f"  init s          {init_s:7.2f} vs {ref['init_s']:6.2f}    ratio {ref['init_s'] / init_s:.2f}"
        )


if __name__ == "__main__":
    main()
