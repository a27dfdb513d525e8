"""How fast the synthetic generator's ``natural`` style makes frames, against the ``classic`` style.

    python benchmarks/synthetic_generator.py [--rounds 5] [--sequences 3] [--frames 30] [--threads 1]

Both styles run in this process, taking turns: each round times ``--sequences`` fresh sequences of one style
then of the other (which goes first alternates), every sequence new (so its assets are built, as a training
loader does on a cache miss). Per style and round: the start of a sequence (simulate + build assets, ms),
the rendering of its frames (frames/s), and frames/s overall for sequences of ``--frames`` frames, start
included. Printed: every round, and the median over rounds of each natural / classic ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import cv2

from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, simulate

STYLES = ("classic", "natural")


def time_style(config: SyntheticConfig, seed: int, first_index: int, sequences: int, frames: int) -> dict:
    """Seconds spent starting ``sequences`` sequences and rendering ``frames`` frames of each."""
    start = render = 0.0
    for index in range(first_index, first_index + sequences):
        t0 = time.perf_counter()
        scene = simulate(config, seed, index)
        assets = build_assets(scene)
        t1 = time.perf_counter()
        for t in range(frames):
            render_frame(scene, assets, t)
        t2 = time.perf_counter()
        start += t1 - t0
        render += t2 - t1
    n = sequences * frames
    return {
        "start_ms": 1000.0 * start / sequences,
        "render_fps": n / render,
        "overall_fps": n / (start + render),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sequences", type=int, default=3, help="fresh sequences per style and round")
    parser.add_argument("--frames", type=int, default=30, help="frames rendered per sequence")
    parser.add_argument("--width", type=int, default=SyntheticConfig.width)
    parser.add_argument("--height", type=int, default=SyntheticConfig.height)
    parser.add_argument("--threads", type=int, default=1, help="OpenCV threads (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    cv2.setNumThreads(args.threads)
    base = SyntheticConfig(width=args.width, height=args.height, num_frames=max(args.frames, 2))
    configs = {style: base.replace(style=style) for style in STYLES}
    # One untimed sequence per style first: imports, caches of shared noise fields.
    for config in configs.values():
        time_style(config, args.seed, 10_000, 1, 2)
    ratios: dict[str, list[float]] = {"start_ms": [], "render_fps": [], "overall_fps": []}
    print(
        f"{args.width}x{args.height}, {args.sequences} sequences x {args.frames} frames per style and round"
    )
    for r in range(args.rounds):
        order = STYLES if r % 2 == 0 else STYLES[::-1]
        results = {
            s: time_style(configs[s], args.seed, r * args.sequences, args.sequences, args.frames)
            for s in order
        }
        for key in ratios:
            ratios[key].append(results["natural"][key] / results["classic"][key])
        line = "  ".join(
            f"{s}: start {results[s]['start_ms']:.0f} ms, render {results[s]['render_fps']:.0f} frames/s, "
            f"overall {results[s]['overall_fps']:.0f} frames/s"
            for s in STYLES
        )
        print(f"round {r + 1}: {line}")
    print(
        "median natural / classic: "
        f"start time {statistics.median(ratios['start_ms']):.2f}x, "
        f"render rate {statistics.median(ratios['render_fps']):.2f}x, "
        f"overall rate {statistics.median(ratios['overall_fps']):.2f}x "
        f"(overall per round: {', '.join(f'{v:.2f}' for v in ratios['overall_fps'])})"
    )


if __name__ == "__main__":
    main()
