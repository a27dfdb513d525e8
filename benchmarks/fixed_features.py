"""Time of the fixed colour and gradient channels for both of the box head's and the classifier's layers.

    python benchmarks/fixed_features.py [--size 128] [--batch 1] [--rounds 7] [--calls 50] [--threads 1]

Times one :class:`~ltr.models.fixed_features.GradientColourFeatures` with ``strides=(8, 16)`` (what the backbone
builds when both ``NetConfig.fixed_clf_features`` and ``fixed_box_features`` are set: the cell maps computed
once) against two modules of one stride each (each computing the same cells), on the same random crops,
interleaved in one process (A, B, A, B, ..., the order reversed every round). Prints per round the
milliseconds per call of each and the ratio separate / shared (> 1: sharing is faster), then the median ratio.
``--size`` is the crop side (the demo network's 128; SuperDiMP's 352).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ltr.models.fixed_features import GradientColourFeatures  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=128, help="crop side, pixels")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="calls per round and variant")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    crops = torch.randn(args.batch, 3, args.size, args.size)
    shared = GradientColourFeatures(strides=(8, 16))
    alone = (GradientColourFeatures(strides=(8,)), GradientColourFeatures(strides=(16,)))
    variants = {"shared": lambda: shared(crops), "separate": lambda: [m(crops) for m in alone]}

    def ms_per_call(name: str) -> float:
        t0 = time.perf_counter()
        for _ in range(args.calls):
            variants[name]()
        return (time.perf_counter() - t0) / args.calls * 1e3

    with torch.inference_mode():
        for name in variants:  # warm-up
            ms_per_call(name)
        ratios = []
        print(
            f"crops {args.batch} x 3 x {args.size} x {args.size}, {args.threads} thread(s), {args.calls} calls"
        )
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            ms = {name: ms_per_call(name) for name in order}
            ratios.append(ms["separate"] / ms["shared"])
            print(
                f"round {r}: shared {ms['shared']:.3f} ms, separate {ms['separate']:.3f} ms, ratio {ratios[-1]:.2f}x"
            )
    print(f"median ratio separate / shared: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
