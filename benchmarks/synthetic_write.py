"""How fast the synthetic dataset is written to disk, and where the time goes.

    python benchmarks/synthetic_write.py [--sequences 100 --frames 100 --layout lasot --workers N]

1. Baseline, in this process, one thread: a few sequences go through each stage separately (simulate,
   build assets, render, JPEG-encode, atomic write) -> frames/s rendered, JPEG encoding share, and the
   time a serial writer would need for the whole set.
2. The real writer (:func:`ltr.dataset.synthetic_io.write_dataset`, process pool + I/O threads) writes the
   whole set to a temporary folder -> wall time, its ratio to the serial estimate and to the 60 s budget.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import cv2

from ltr.admin.io import atomic_write
from ltr.dataset.synthetic_io import write_dataset
from ltr.dataset.synthetic_render import build_assets, render_frame
from ltr.dataset.synthetic_scene import SyntheticConfig, simulate

BUDGET_S = 60.0


def profile_serial(config: SyntheticConfig, seed: int, sequences: int, out: Path) -> dict[str, float]:
    """Seconds per stage for ``sequences`` sequences, stages run one after another on one thread."""
    cv2.setNumThreads(1)
    totals = dict.fromkeys(("simulate", "assets", "render", "encode", "write"), 0.0)
    frames = 0
    for index in range(sequences):
        t0 = time.perf_counter()
        scene = simulate(config, seed, index)
        t1 = time.perf_counter()
        assets = build_assets(scene)
        t2 = time.perf_counter()
        totals["simulate"] += t1 - t0
        totals["assets"] += t2 - t1
        images = []
        for t in range(scene.num_frames):
            images.append(render_frame(scene, assets, t))
        t3 = time.perf_counter()
        totals["render"] += t3 - t2
        encoded = []
        for image in images:
            ok, buf = cv2.imencode(
                ".jpg", cv2.cvtColor(image, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90]
            )
            assert ok
            encoded.append(buf.tobytes())
        t4 = time.perf_counter()
        totals["encode"] += t4 - t3
        for t, data in enumerate(encoded):
            atomic_write(out / f"{index:03d}" / f"{t + 1:08d}.jpg", lambda f, d=data: f.write(d))
        totals["write"] += time.perf_counter() - t4
        frames += len(images)
    totals["frames"] = float(frames)
    return totals


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=100)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--layout", default="lasot", choices=("lasot", "otb"))
    parser.add_argument("--workers", type=int, default=None, help="default: CPU count")
    parser.add_argument("--profile-sequences", type=int, default=5)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--height", type=int, default=240)
    args = parser.parse_args()
    config = SyntheticConfig(width=args.width, height=args.height, num_frames=args.frames)
    workers = args.workers or os.cpu_count() or 1
    tmp = Path(tempfile.mkdtemp(prefix="synthetic_write_"))
    try:
        prof = profile_serial(config, 1, args.profile_sequences, tmp / "profile")
        n = prof["frames"]
        per_frame = {k: prof[k] / n for k in ("render", "encode", "write")}
        per_seq = {k: prof[k] / args.profile_sequences for k in ("simulate", "assets")}
        print(f"image {args.width}x{args.height}, {args.frames} frames/sequence, {os.cpu_count()} CPUs")
        print(f"[baseline, 1 thread, {args.profile_sequences} sequences]")
        for key, value in per_seq.items():
            print(f"  {key:8s} {value * 1e3:7.1f} ms/sequence")
        for key, value in per_frame.items():
            print(f"  {key:8s} {value * 1e3:7.2f} ms/frame")
        print(f"  rendered frames/s: {1.0 / per_frame['render']:.0f}")
        cpu = per_frame["render"] + per_frame["encode"]
        print(f"  JPEG encoding share of render+encode: {per_frame['encode'] / cpu:.1%}")
        total_frame = sum(per_frame.values()) + sum(per_seq.values()) / args.frames
        print(
            f"  encode share of all stages: {per_frame['encode'] / total_frame:.1%}, "
            f"file write (atomic, fsync) share: {per_frame['write'] / total_frame:.1%}"
        )
        serial = total_frame * args.sequences * args.frames
        print(f"  serial estimate for {args.sequences} x {args.frames}: {serial:.1f} s")

        print(f"[write_dataset, {workers} worker processes, layout {args.layout}]")
        start = time.perf_counter()
        cpu_start, children_start = time.process_time(), _children_cpu()
        stats = write_dataset(
            tmp / "set",
            layout=args.layout,
            num_sequences=args.sequences,
            seed=1,
            config=config,
            workers=workers,
            progress=False,
        )
        wall = time.perf_counter() - start
        files = sum(1 for _ in (tmp / "set").rglob("*.jpg"))
        assert files == stats.frames == args.sequences * args.frames, (files, stats.frames)
        print(f"  wrote {files} frames in {wall:.1f} s ({files / wall:.0f} frames/s)")
        print(f"  speed-up over the serial baseline: {serial / wall:.2f}x")
        verdict = "within" if wall <= BUDGET_S else "OVER"
        print(f"  wall / {BUDGET_S:.0f} s budget: {wall / BUDGET_S:.2f} ({verdict})")
        cpu_s = time.process_time() - cpu_start + _children_cpu() - children_start
        print(
            f"  CPU seconds (this process + workers): {cpu_s:.1f} -> {cpu_s / files * 1e3:.2f} ms/frame; "
            f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
