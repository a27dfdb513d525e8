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


class _Clock:
    """Accumulates wall (perf_counter) and CPU (process_time) seconds per stage."""

    def __init__(self, stages: tuple[str, ...]) -> None:
        self.wall = dict.fromkeys(stages, 0.0)
        self.cpu = dict.fromkeys(stages, 0.0)
        self._mark = (time.perf_counter(), time.process_time())

    def lap(self, stage: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.wall[stage] += now[0] - self._mark[0]
        self.cpu[stage] += now[1] - self._mark[1]
        self._mark = now


def profile_serial(config: SyntheticConfig, seed: int, sequences: int, out: Path) -> tuple[_Clock, int]:
    """Per-stage seconds for ``sequences`` sequences, stages run one after another on one thread."""
    cv2.setNumThreads(1)
    clock = _Clock(("simulate", "assets", "render", "encode", "write"))
    frames = 0
    for index in range(sequences):
        scene = simulate(config, seed, index)
        clock.lap("simulate")
        assets = build_assets(scene)
        clock.lap("assets")
        images = [render_frame(scene, assets, t) for t in range(scene.num_frames)]
        clock.lap("render")
        encoded = []
        for image in images:
            bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
            ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, 90])
            assert ok
            encoded.append(buf.tobytes())
        clock.lap("encode")
        for t, data in enumerate(encoded):
            atomic_write(out / f"{index:03d}" / f"{t + 1:08d}.jpg", lambda f, d=data: f.write(d))
        clock.lap("write")
        frames += len(images)
    return clock, frames


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
        clock, n = profile_serial(config, 1, args.profile_sequences, tmp / "profile")
        print(f"image {args.width}x{args.height}, {args.frames} frames/sequence, {os.cpu_count()} CPUs")
        print(f"[baseline, 1 thread, {args.profile_sequences} sequences]  wall / CPU")
        for key in ("simulate", "assets"):
            wall, cpu = (d[key] / args.profile_sequences * 1e3 for d in (clock.wall, clock.cpu))
            print(f"  {key:8s} {wall:7.1f} / {cpu:7.1f} ms per sequence")
        for key in ("render", "encode", "write"):
            wall, cpu = (d[key] / n * 1e3 for d in (clock.wall, clock.cpu))
            print(f"  {key:8s} {wall:7.2f} / {cpu:7.2f} ms per frame")
        fps_wall, fps_cpu = n / clock.wall["render"], n / clock.cpu["render"]
        print(f"  rendered frames/s: {fps_wall:.0f} (per CPU-second: {fps_cpu:.0f})")
        for label, d in (("wall", clock.wall), ("CPU", clock.cpu)):
            total = sum(d.values())
            enc = d["encode"] / (d["render"] + d["encode"])
            print(
                f"  {label:4s} shares: JPEG encode {enc:.1%} of render+encode, {d['encode'] / total:.1%} of "
                f"all stages; file write (atomic, fsync) {d['write'] / total:.1%}"
            )
        scale = args.sequences * args.frames / n
        serial = sum(clock.wall.values()) * scale
        cpu_total = sum(clock.cpu.values()) * scale
        size = f"{args.sequences} x {args.frames}"
        print(f"  serial estimate for {size}: {serial:.1f} s wall, {cpu_total:.1f} s CPU")

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
        cpus = min(workers, os.cpu_count() or 1)
        print(f"  projected wall with {cpus} idle CPUs (CPU seconds / CPUs): {cpu_s / cpus:.1f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
