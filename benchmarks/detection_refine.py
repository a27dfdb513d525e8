"""Refinement cost: all boxes of an image batch in one Algorithm-S1 ascent versus one ascent per box.

``python benchmarks/detection_refine.py [--boxes 100] [--images 2] [--repeats 3] [--threads 1]``

Prints the wall time of both ways in the same process and their ratio (per-box / batched), and checks that
both give the same boxes.
"""

from __future__ import annotations

import argparse
import time

import torch

from ltr.detection.detector import TINY_LEVELS
from ltr.detection.energy import BoxScorer
from ltr.ebm import gradient_ascent
from ltr.models.detection import DetectionEnergyHead


def _refine(head, feats, ref, index):
    scorer = BoxScorer(head, feats, TINY_LEVELS, ref, index)
    steps = [1e-4, 1e-4, 4e-4, 4e-4]
    return gradient_ascent(scorer, ref.new_zeros(len(ref), 1, 4), step_length=steps, num_iters=10).y


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--boxes", type=int, default=100, help="boxes per image")
    p.add_argument("--images", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    feats = [
        torch.randn(args.images, 64, 32, 32, generator=gen),
        torch.randn(args.images, 64, 16, 16, generator=gen),
    ]
    n = args.boxes * args.images
    ref = torch.cat([torch.rand(n, 2, generator=gen) * 180, torch.rand(n, 2, generator=gen) * 60 + 16], 1)
    index = torch.arange(args.images).repeat_interleave(args.boxes)
    head = DetectionEnergyHead(in_channels=64, pool_size=5, hidden=256).eval()

    def batched():
        return _refine(head, feats, ref, index)

    def per_box():
        return torch.cat([_refine(head, feats, ref[i : i + 1], index[i : i + 1]) for i in range(n)])

    results = {}
    for name, fn in (("batched", batched), ("per_box", per_box)):
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            out = fn()
            best = min(best, time.perf_counter() - start)
        results[name] = (best, out)
    same = torch.allclose(results["batched"][1], results["per_box"][1], atol=1e-5)
    print(f"{n} boxes on {args.images} images, T=10, {args.threads} thread(s), best of {args.repeats}")
    print(f"batched  {results['batched'][0] * 1e3:9.1f} ms")
    print(f"per box  {results['per_box'][0] * 1e3:9.1f} ms")
    print(
        f"ratio per-box / batched: {results['per_box'][0] / results['batched'][0]:.1f}x   same boxes: {same}"
    )
    if not same:
        raise SystemExit("error: batched and per-box refinement disagree")


if __name__ == "__main__":
    main()
