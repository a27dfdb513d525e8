"""Where a lockstep step's GPU time goes: the network's convolution stages under cuDNN settings, and the kernels.

    python benchmarks/gpu_stages.py [--device cuda] [--batch 64] [--size 352] [--iters 10] [--kernels]

The network is our ``nce_plus`` (SuperDiMP's geometry: ResNet-50 to layer3, 352-pixel crops) with random
weights. For each setting, in this order in one process: the default (full float32, cuDNN's heuristics),
``torch.backends.cudnn.benchmark``, channels-last tensors, both, and TF32 convolutions. Printed per setting:
the median milliseconds over ``--iters`` calls (synchronised) of the backbone, the classifier's feature
head, the box head's test branches, and all three in a row, at batch ``--batch``; the largest difference
of the outputs from the default's (relative to each output's largest value); and the largest difference
between an image's output computed alone and in the batch (the first three images; the batch equivalence
of ``run_tracker.py --batch`` rests on it).

``--kernels``: afterwards, ``--batch`` trackers with the ``super_dimp`` parameters and the refinement as a
CUDA graph (on a GPU; the thresholds of ``tracker_fps.OPEN``) track five frames of a 1280x720 video
under ``torch.profiler``; the table lists the operations and kernels by their total device time.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import Tensor

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.tracker_fps import OPEN, make_video, video_box  # noqa: E402
from pytracking.parameter.dimp import get_parameters  # noqa: E402
from pytracking.tracker.dimp import DiMPTracker, LoadedNet, random_network  # noqa: E402
from pytracking.tracker.dimp.lockstep import track_frames  # noqa: E402

BOX_LAYERS = ("layer2", "layer3")
#: name -> (cudnn.benchmark, TF32, channels-last)
SETTINGS = {
    "default": (False, False, False),
    "benchmark": (True, False, False),
    "channels_last": (False, False, True),
    "cl+benchmark": (True, False, True),
    "tf32": (False, True, False),
}


def stage_times(loaded: LoadedNet, args: argparse.Namespace, device: torch.device) -> None:
    """The settings' table (module docstring)."""
    net = loaded.net
    cuda = device.type == "cuda"
    images = torch.randn(args.batch, 3, args.size, args.size, generator=torch.Generator().manual_seed(0))
    images = images.to(device)

    def stages(x: Tensor) -> dict[str, Tensor]:
        feats = net.backbone(x)
        clf = net.classifier.feature_head(feats["layer3"])
        t2, t3 = net.box_head.get_test_features([feats[n] for n in BOX_LAYERS])
        return {"layer3": feats["layer3"], "clf": clf, "t2": t2, "t3": t3}

    def timed(fn: Callable, *inputs: object) -> tuple[float, object]:
        times, out = [], None
        for _ in range(args.iters):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            out = fn(*inputs)
            if cuda:
                torch.cuda.synchronize()
            times.append(1000 * (time.perf_counter() - start))
        return statistics.median(times), out

    name = torch.cuda.get_device_name() if cuda else "CPU"
    print(f"{name}, torch {torch.__version__}, B={args.batch}, {args.size}x{args.size} crops; ms per call")
    reference: dict[str, Tensor] | None = None
    cudnn = torch.backends.cudnn
    saved = (cudnn.benchmark, cudnn.allow_tf32)
    try:
        with torch.no_grad():
            for setting, (benchmark, tf32, channels_last) in SETTINGS.items():
                cudnn.benchmark, cudnn.allow_tf32 = benchmark, tf32
                layout = torch.channels_last if channels_last else torch.contiguous_format
                net.to(memory_format=layout)
                x = images.contiguous(memory_format=layout)
                for _ in range(3):
                    stages(x)
                backbone, feats = timed(net.backbone, x)
                clf, _ = timed(net.classifier.feature_head, feats["layer3"])  # type: ignore[index]
                box, _ = timed(net.box_head.get_test_features, [feats[n] for n in BOX_LAYERS])  # type: ignore[index]
                total, out = timed(stages, x)
                assert isinstance(out, dict)
                alone = [stages(x[i : i + 1]) for i in range(min(3, args.batch))]
                rows = max(
                    float((a[k][0] - out[k][i]).abs().max() / out[k][i].abs().max())
                    for i, a in enumerate(alone)
                    for k in out
                )
                reference = reference or out
                moved = max(
                    float((out[k] - reference[k]).abs().max() / reference[k].abs().max()) for k in out
                )
                print(
                    f"{setting:<14} all {total:6.1f}  backbone {backbone:5.1f}  classifier features {clf:5.1f}  "
                    f"box features {box:5.1f}  difference from default {moved:.1e}, image alone vs in batch "
                    f"{rows:.1e}",
                    flush=True,
                )
    finally:
        cudnn.benchmark, cudnn.allow_tf32 = saved
        net.to(memory_format=torch.contiguous_format)


def kernels(loaded: LoadedNet, args: argparse.Namespace, device: torch.device) -> None:
    """``--kernels`` (module docstring)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    params = dataclasses.replace(get_parameters("super_dimp"), cuda_graph=cuda, **OPEN)
    b, steps = args.batch, 5
    frames, _ = make_video(b + steps + 3, 1280, 720)
    trackers = [DiMPTracker(loaded.net, loaded.geometry, params) for _ in range(b)]
    for i, t in enumerate(trackers):
        t.initialize(frames[i], video_box(i))
    for k in (1, 2):  # untimed: the graphs are captured here
        track_frames(trackers, [frames[i + k] for i in range(b)])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        for k in range(3, 3 + steps):
            track_frames(trackers, [frames[i + k] for i in range(b)])
        if cuda:
            torch.cuda.synchronize()
    print(f"\n{steps} steps of {b} trackers under torch.profiler:")
    key = "cuda_time_total" if cuda else "cpu_time_total"
    print(prof.key_averages().table(sort_by=key, row_limit=30, max_name_column_width=60))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=352, help="crop side in pixels")
    ap.add_argument("--iters", type=int, default=10, help="timed calls per stage and setting")
    ap.add_argument("--kernels", action="store_true", help="profile five lockstep steps afterwards")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    loaded = random_network("nce_plus", device=device)
    stage_times(loaded, args, device)
    if args.kernels:
        kernels(loaded, args, device)


if __name__ == "__main__":
    main()
