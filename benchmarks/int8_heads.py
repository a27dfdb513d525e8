"""Speed of the tracker heads' convolutions in float32, int8 (``ltr.ops.int8_conv``) and bfloat16, per shape.

python benchmarks/int8_heads.py [--threads 2] [--repeats 50]

The shapes are the per-frame convolutions outside the backbone of the paper's network (``nce_plus``):
the classifier's feature head (3x3, 1024 -> 512, padded, on the 18 x 18 layer-3 map of DiMP-50's 288-pixel
crop and the 22 x 22 map of SuperDiMP's 352-pixel crop), and the box head's test branches (3x3, unpadded, on a
refinement window of 21 x 19 layer-2 cells and 10 x 11 layer-3 cells plus the halo the next convolution
reads; ``benchmarks/box_ascent.py`` uses the same window). Inputs are random, non-negative (they follow a
ReLU), channels_last, batch 1, as in the tracker. The three variants of a shape alternate in the same process.

Printed per shape: ms per call (the median of ``repeats / 3`` calls, in three rounds that alternate the
variants, averaged over the rounds) of float32, int8 (quantising the input included) and bfloat16 (the input
cast included), the ratios float32 / int8 and float32 / bfloat16 (above 1: faster than float32), and int8's
relative error against float32 (the norm of the difference over the norm of the float32 output).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ltr.ops.int8_conv import Int8Conv2d, int8_available

# name, in channels, out channels, input height, input width, padding
SHAPES = (
    ("classifier, DiMP-50 (18 x 18)", 1024, 512, 18, 18, 1),
    ("classifier, SuperDiMP (22 x 22)", 1024, 512, 22, 22, 1),
    ("box layer 2, first conv (window)", 512, 256, 25, 23, 0),
    ("box layer 2, second conv", 256, 256, 23, 21, 0),
    ("box layer 3, first conv (window)", 1024, 256, 14, 15, 0),
    ("box layer 3, second conv", 256, 256, 12, 13, 0),
)


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return 1000 * times[len(times) // 2]


def time_shape(
    cin: int, cout: int, h: int, w: int, pad: int, calls: int
) -> tuple[float, float, float, float]:
    """(float32 ms, int8 ms, bfloat16 ms, int8's relative error) for one convolution shape, random weights."""
    conv = nn.Conv2d(cin, cout, 3, padding=pad).eval()
    x = torch.relu(torch.randn(1, cin, h, w)).contiguous(memory_format=torch.channels_last)
    weight, bias = conv.weight.detach(), conv.bias.detach()
    weight_bf16, bias_bf16 = weight.bfloat16(), bias.bfloat16()
    int8 = Int8Conv2d(conv)
    variants = (
        lambda: F.conv2d(x, weight, bias, padding=pad),
        lambda: int8(x),
        lambda: F.conv2d(x.bfloat16(), weight_bf16, bias_bf16, padding=pad),
    )
    with torch.no_grad():
        reference = F.conv2d(x, weight, bias, padding=pad)
        error = float((int8(x) - reference).norm() / reference.norm())
        runs = [0.0, 0.0, 0.0]
        for _ in range(3):  # alternate the variants: a busy phase of the machine hits all of them
            for k, fn in enumerate(variants):
                runs[k] += median_ms(fn, calls)
    return runs[0] / 3, runs[1] / 3, runs[2] / 3, error


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    if not int8_available():
        raise SystemExit("int8_heads.py: this torch build has no oneDNN int8 convolution (torch.ops.onednn)")
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    calls = args.repeats // 3 + 1
    print(
        f"torch threads {args.threads}, ms per call: median of {calls} calls, mean of 3 alternating rounds; "
        "batch 1, channels_last"
    )
    header = ("shape", "in->out", "float32", "int8", "bf16", "f32/int8", "f32/bf16", "int8 err")
    print(f"{header[0]:<34} {header[1]:>10} " + " ".join(f"{h:>9}" for h in header[2:]))
    totals = [0.0, 0.0, 0.0]
    for name, cin, cout, h, w, pad in SHAPES:
        f32, i8, bf, error = time_shape(cin, cout, h, w, pad, calls)
        totals = [t + v for t, v in zip(totals, (f32, i8, bf), strict=True)]
        print(
            f"{name:<34} {f'{cin}->{cout}':>10} {f32:9.2f} {i8:9.2f} {bf:9.2f} "
            f"{f32 / i8:9.2f} {f32 / bf:9.2f} {error:9.4f}"
        )
    f32, i8, bf = totals
    print(
        f"all six: float32 {f32:.2f} ms, int8 {i8:.2f} ms, bfloat16 {bf:.2f} ms; ratio float32 / int8 "
        f"{f32 / i8:.2f}, float32 / bfloat16 {f32 / bf:.2f}"
    )


if __name__ == "__main__":
    main()
