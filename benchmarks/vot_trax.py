"""The TraX path's start-up time and per-frame overhead against our own tracker loop on the same frames.

    python benchmarks/vot_trax.py [--net CKPT --param P] [--sequence NAME] [--frames N] [--rounds R]
        [--threads T] [--device cpu]

Without ``--net`` a random tiny DiMP network (the CPU-sized ``nce_plus_tiny`` geometry) is written to a
temporary folder. Frames are a synthetic test sequence written in the VOT layout (JPEG). Each round:

1. **start-up**: a server process is launched as the VOT toolkit launches it (``python -m pytracking.vot``,
   pipes on stdin/stdout); the time to the TraX handshake, then to the answer to ``initialize`` (which loads
   the network), against the toolkit's default reply timeout of 30 s;
2. **frames**: our tracker in this process (``initialize`` + ``track`` on images read with the runner's
   reader) and the server over TraX (the toolkit's path: image paths in, rectangles out) on the same frames,
   taking turns frame by frame; the per-frame ratio and the overhead in milliseconds.

Torch runs with ``--threads`` threads in both (``OMP_NUM_THREADS`` for the server).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from ltr.dataset.base import read_image_checked  # noqa: E402
from ltr.dataset.registry import get_dataset  # noqa: E402
from pytracking.evaluation.tracker_spec import TrackerSpec, build_tracker, prepare_spec  # noqa: E402
from pytracking.vot.client import TraxSession  # noqa: E402
from pytracking.vot.sequences import write_sequence  # noqa: E402


def _tiny_checkpoint(path: Path) -> Path:
    """A checkpoint file of a random-weight network of the ``nce_plus_tiny`` train setting."""
    from ltr.admin.checkpoint import FORMAT, VERSION, save_checkpoint
    from ltr.admin.config import to_dict
    from ltr.models.tracking import build_dimpnet
    from ltr.train_settings.dimp import SETTINGS

    cfg = SETTINGS["nce_plus_tiny"]()
    torch.manual_seed(0)
    payload = {"format": FORMAT, "version": VERSION, "setting": "dimp/nce_plus_tiny", "epoch": 1}
    save_checkpoint(path, {**payload, "config": to_dict(cfg), "net": build_dimpnet(cfg.net).state_dict()})
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--net", default=None, help="checkpoint (default: a random tiny network)")
    p.add_argument("--param", default="nce_plus_tiny", help="dimp parameter set")
    p.add_argument("--sequence", default="checkerblob-1", help="synthetic test sequence")
    p.add_argument("--frames", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        net = Path(args.net) if args.net else _tiny_checkpoint(Path(tmp) / "tiny.pth")
        folder = Path(tmp) / "seq"
        write_sequence(get_dataset("synthetic").get_sequence(args.sequence), folder, args.frames)
        paths = [folder / "color" / f"{i:08d}.jpg" for i in range(1, args.frames + 1)]
        box = [float(v) for v in (folder / "groundtruth.txt").read_text().splitlines()[0].split(",")]
        spec, _ = prepare_spec(TrackerSpec("dimp", args.param, str(net), args.device))
        command = [sys.executable, "-m", "pytracking.vot", "dimp", args.param, "--net", str(net)]
        command += ["--device", args.device]
        env = {"OMP_NUM_THREADS": str(args.threads)}
        print(
            f"dimp/{args.param}, {net.name}, {args.frames} frames of {args.sequence}, {args.threads} thread(s)"
        )
        print("round | handshake s | initialize s | ours ms/frame | TraX ms/frame | TraX/ours | overhead ms")
        ratios, overheads = [], []
        for r in range(args.rounds):
            t0 = time.perf_counter()
            session = TraxSession(command, env=env)
            handshake = time.perf_counter() - t0
            t1 = time.perf_counter()
            session.initialize(paths[0], box)
            initialize = time.perf_counter() - t1
            ours = build_tracker(spec)
            ours.initialize(read_image_checked(paths[0]), box)
            own, trax = [], []
            for path in paths[1:]:  # turns frame by frame
                a = time.perf_counter()
                ours.track(read_image_checked(path))
                b = time.perf_counter()
                session.frame(path)
                c = time.perf_counter()
                own.append(b - a)
                trax.append(c - b)
            session.close()
            mo, mt = statistics.median(own) * 1e3, statistics.median(trax) * 1e3
            ratios.append(mt / mo)
            overheads.append(mt - mo)
            print(
                f"{r:5d} | {handshake:11.2f} | {initialize:12.2f} | {mo:13.1f} | {mt:13.1f} | {mt / mo:9.2f} | {mt - mo:11.1f}"
            )
        print(
            f"median over rounds: TraX/ours {statistics.median(ratios):.2f}x, overhead {statistics.median(overheads):.1f} ms/frame"
        )


if __name__ == "__main__":
    main()
