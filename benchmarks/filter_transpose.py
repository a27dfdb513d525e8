"""Speed of the classifier's filter gradient (``apply_filter_transpose``) against the grouped convolution it
replaced, on the tracker's and the training's shapes.

    python benchmarks/filter_transpose.py [--threads 2] [--repeats 20]

The filter gradient ``sum_i features[i] (*) maps[i]`` is what the DiMP filter optimiser computes once per
iteration, over the whole sample memory in the tracker (50 samples of 512 x 18 x 18 for DiMP-50) and over a
training batch. The baseline is the formula the project used first: one grouped 2-D convolution with the
channels as the batch and each (H', W') score map as a kernel. The two are called alternately in this process;
printed are the median milliseconds of each, their ratio (> 1: the product is faster) and the largest
difference of the results relative to their largest value.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr.models.target_classifier import apply_filter_transpose, score_map_size

CASES = [  # (name, images per sequence S, sequences B, channels C, feature size, filter size)
    ("tracker DiMP-50 memory (50 samples, 18x18)", 50, 1, 512, 18, 4),
    ("tracker SuperDiMP memory (50 samples, 22x22)", 50, 1, 512, 22, 4),
    ("tracker initial samples (15, 18x18)", 15, 1, 512, 18, 4),
    ("training batch (3 images x 10 sequences)", 3, 10, 512, 18, 4),
]


def grouped_conv_transpose(features: Tensor, maps: Tensor, filter_size: int) -> Tensor:
    """The baseline: (S, B, C, H, W) features, (S, B, H', W') maps -> (B, C, k, k) by a grouped convolution."""
    s, b, c, h, w = features.shape
    inputs = features.permute(2, 1, 0, 3, 4).reshape(c, b * s, h, w)
    grads = F.conv2d(inputs, maps.transpose(0, 1), padding=filter_size // 2, groups=b)  # (C, B, k, k)
    return grads.transpose(0, 1)


def _time(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch threads {args.threads}, {args.repeats} alternating calls each, median ms")
    for name, s, b, c, size, k in CASES:
        features = torch.randn(s, b, c, size, size)
        maps = torch.randn(s, b, *score_map_size((size, size), k))
        with torch.no_grad():
            ours, base = apply_filter_transpose(features, maps, k), grouped_conv_transpose(features, maps, k)
            diff = float((ours - base).abs().max() / base.abs().max())
            t_ours, t_base = [], []
            for _ in range(args.repeats):
                t_base.append(_time(grouped_conv_transpose, features, maps, k))
                t_ours.append(_time(apply_filter_transpose, features, maps, k))
        m_ours, m_base = statistics.median(t_ours), statistics.median(t_base)
        print(
            f"  {name:<48} grouped conv {m_base:7.2f}   product {m_ours:6.2f}   ratio {m_base / m_ours:5.1f}x"
            f"   rel. diff {diff:.1e}"
        )


if __name__ == "__main__":
    main()
