"""Speed of the classifier's filter correlation (``apply_filter``) and its transpose, the filter gradient
(``apply_filter_transpose``), against the grouped convolutions they replaced, on the tracker's and the
training's shapes.

    python benchmarks/filter_transpose.py [--threads 2] [--repeats 20]

The scores ``features (*) filter`` and the filter gradient ``sum_i features[i] (*) maps[i]`` are what the DiMP
filter optimiser computes once per iteration, over the whole sample memory in the tracker (50 samples of
512 x 18 x 18 for DiMP-50) and over a training batch; the tracker also scores one image per frame. The
baselines are the formulas the project used first: one grouped 2-D convolution with the sequences as groups
(the scores) and one with the channels as the batch and each (H', W') score map as a kernel (the gradient).
Ours and the baseline are called alternately in this process; printed are the median milliseconds of each,
their ratio (> 1: ours is faster) and the largest difference of the results relative to their largest value.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import Tensor

from ltr.models.target_classifier import apply_filter, apply_filter_transpose, score_map_size

CASES = [  # (name, images per sequence S, sequences B, channels C, feature size, filter size)
    ("tracker DiMP-50 memory (50 samples, 18x18)", 50, 1, 512, 18, 4),
    ("tracker SuperDiMP memory (50 samples, 22x22)", 50, 1, 512, 22, 4),
    ("tracker initial samples (15, 18x18)", 15, 1, 512, 18, 4),
    ("training batch (3 images x 10 sequences)", 3, 10, 512, 18, 4),
    ("tracker frame (1 image, 18x18)", 1, 1, 512, 18, 4),
]


def grouped_conv_apply(features: Tensor, filters: Tensor) -> Tensor:
    """The baseline: (S, B, C, H, W) features, (B, C, k, k) filters -> (S, B, H', W') by a grouped convolution."""
    s, b, c, h, w = features.shape
    return F.conv2d(features.reshape(s, b * c, h, w), filters, padding=filters.shape[-1] // 2, groups=b)


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
        filters = torch.randn(b, c, k, k)
        maps = torch.randn(s, b, *score_map_size((size, size), k))
        ops = {
            "scores": (apply_filter, grouped_conv_apply, (features, filters)),
            "filter gradient": (apply_filter_transpose, grouped_conv_transpose, (features, maps, k)),
        }
        for op, (ours_fn, base_fn, inputs) in ops.items():
            with torch.no_grad():
                ours, base = ours_fn(*inputs), base_fn(*inputs)
                diff = float((ours - base).abs().max() / base.abs().max())
                t_ours, t_base = [], []
                for _ in range(args.repeats):
                    t_base.append(_time(base_fn, *inputs))
                    t_ours.append(_time(ours_fn, *inputs))
            m_ours, m_base = statistics.median(t_ours), statistics.median(t_base)
            print(
                f"  {name:<46} {op:<15} grouped conv {m_base:7.2f}   product {m_ours:6.2f}   "
                f"ratio {m_base / m_ours:5.1f}x   rel. diff {diff:.1e}"
            )


if __name__ == "__main__":
    main()
