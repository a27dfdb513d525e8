"""Speed of ltr.ops.prroi_pool against torchvision.ops.roi_align on the DiMP box-head shapes.

    python benchmarks/prroi_pool.py [--threads 2] [--repeats 30] [--device cpu]

Both ops get the same features (B images, C channels) and the same N boxes (xyxy image pixels of a
288 x 288 crop), spread evenly over the images and sorted by image ("even", as in a training batch with a
fixed number of proposals per image), given random image indices ("random"), or evenly spread proposals
jittered around a target near the crop centre ("dimp", what the DiMP box head sees).
roi_align runs with aligned=False and sampling_ratio=2 (approximate, no box gradient); prroi_pool is exact
and differentiable in the boxes. The two are called alternately; printed are the median wall milliseconds,
the median wall ratio ours / roi_align (below 1.0: ours is faster), the ratio of the best wall times
(closest to an idle machine) and the ratio of median process CPU time. "fwd+bwd" back-propagates into the
features only, the way roi_align can; "fwd+bwd+box" makes prroi_pool also back-propagate into the box
coordinates (compared with the same roi_align fwd+bwd). On a shared, oversubscribed machine the median wall
ratio at 2 threads mostly measures how often intra-op threads wait for each other (roi_align's CPU kernel is
one serial loop, the matrix products are threaded): compare with --threads 1 there.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch
from torchvision.ops import roi_align

from ltr.ops import prroi_pool

IMAGE_SIZE = 288.0
CASES = [  # (map size, stride, output size)
    (36, 8, 5),
    (18, 16, 3),
]
Pool = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def make_inputs(
    images: int,
    channels: int,
    boxes: int,
    size: int,
    spread: str,
    device: torch.device,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Features (B, C, size, size) and rois (N, 5) of (batch index, x1, y1, x2, y2) on a 288-pixel crop.

    ``spread``: "even" (boxes 20-140 px wide anywhere, N / B per image, sorted by image), "random" (the same
    boxes with uniform random image indices) or "dimp" (N / B proposals per image, sorted, jittered around a
    target of about 58 px near the crop centre, as the DiMP box head sees them in training).
    """
    features = torch.randn(images, channels, size, size, generator=generator)
    index = (torch.arange(boxes) * images // boxes).float()[:, None]
    if spread == "dimp":
        target_centre = IMAGE_SIZE / 2 + (torch.rand(images, 2, generator=generator) - 0.5) * 80
        target_size = 58 * torch.exp((torch.rand(images, 2, generator=generator) - 0.5) * 0.6)
        image = index[:, 0].long()
        wh = target_size[image] * torch.exp(torch.randn(boxes, 2, generator=generator) * 0.25)
        centre = target_centre[image] + torch.randn(boxes, 2, generator=generator) * 0.25 * target_size[image]
    else:
        wh = torch.rand(boxes, 2, generator=generator) * 120 + 20
        centre = torch.rand(boxes, 2, generator=generator) * IMAGE_SIZE
    if spread == "random":
        index = torch.randint(0, images, (boxes, 1), generator=generator).float()
    rois = torch.cat([index, centre - wh / 2, centre + wh / 2], dim=1)
    return features.to(device), rois.to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compare(
    baseline: Callable[[], object], candidate: Callable[[], object], repeats: int, device: torch.device
) -> dict[str, float]:
    """Wall and process-CPU milliseconds of ``baseline`` and ``candidate``, calls interleaved.

    Returns the medians ("base", "cand", "base_cpu", "cand_cpu") and the best wall times ("base_min",
    "cand_min"), which come closest to what an idle machine would show.
    """
    for _ in range(2):
        baseline()
        candidate()
    times: dict[str, list[float]] = {"base": [], "cand": [], "base_cpu": [], "cand_cpu": []}
    for _ in range(repeats):
        for fn, name in ((baseline, "base"), (candidate, "cand")):
            _sync(device)
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            _sync(device)
            times[name].append((time.perf_counter() - start) * 1e3)
            times[name + "_cpu"].append((time.process_time() - start_cpu) * 1e3)
    result = {key: statistics.median(values) for key, values in times.items()}
    result.update(base_min=min(times["base"]), cand_min=min(times["cand"]))
    return result


def forward(pool: Pool, features: torch.Tensor, rois: torch.Tensor) -> None:
    with torch.no_grad():
        pool(features, rois)


def forward_backward(pool: Pool, features: torch.Tensor, rois: torch.Tensor, box_grad: bool) -> None:
    feat = features.detach().requires_grad_(True)
    boxes = rois.detach().requires_grad_(box_grad)
    pool(feat, boxes).sum().backward()


def ours(features: torch.Tensor, rois: torch.Tensor, out: int, scale: float) -> torch.Tensor:
    return prroi_pool(features, rois, out, scale)


def theirs(features: torch.Tensor, rois: torch.Tensor, out: int, scale: float) -> torch.Tensor:
    return roi_align(features, rois, out, spatial_scale=scale, sampling_ratio=2, aligned=False)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per measurement (default 30)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--channels", type=int, default=256)
    parser.add_argument("--boxes", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    generator = torch.Generator().manual_seed(0)
    print(
        f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
        f"{args.images} images x {args.channels} channels, {args.boxes} boxes, median of {args.repeats}, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    header = ("boxes", "map", "out", "pass", "roi_align ms", "prroi ms", "ratio", "best ratio", "cpu ratio")
    line = "{:>7} {:>6} {:>4} {:>12} {:>13} {:>9} {:>6} {:>11} {:>10}"
    print(line.format(*header))
    for spread, (size, stride, out) in itertools.product(("even", "random", "dimp"), CASES):
        features, rois = make_inputs(args.images, args.channels, args.boxes, size, spread, device, generator)
        mine = partial(ours, out=out, scale=1.0 / stride)
        base = partial(theirs, out=out, scale=1.0 / stride)
        passes = {
            "fwd": (partial(forward, base, features, rois), partial(forward, mine, features, rois)),
            "fwd+bwd": (
                partial(forward_backward, base, features, rois, False),
                partial(forward_backward, mine, features, rois, False),
            ),
            "fwd+bwd+box": (
                partial(forward_backward, base, features, rois, False),
                partial(forward_backward, mine, features, rois, True),
            ),
        }
        for name, (baseline, candidate) in passes.items():
            t = compare(baseline, candidate, args.repeats, device)
            ratios = [t["cand"] / t["base"], t["cand_min"] / t["base_min"], t["cand_cpu"] / t["base_cpu"]]
            times = [f"{t['base']:.2f}", f"{t['cand']:.2f}", *(f"{r:.2f}" for r in ratios)]
            print(line.format(spread, f"{size}x{size}", out, name, *times))


if __name__ == "__main__":
    main()
