"""Tracker frame rate on the CPU: this toolkit's DiMP tracker and pytracking's, side by side in one process.

    python benchmarks/tracker_fps.py [--pytracking PATH] [--geometry dimp50|super_dimp|nce_plus_tiny]
                                     [--rounds 3] [--frames 20] [--warmup 2] [--threads 1] [--compile]
                                     [--fixed-cost | --against KEY=VALUE [KEY=VALUE ...]]

Both trackers run the same network: pytracking's ``dimpnet50`` with the seeded weights of the tracker golden
files (``tests/golden/tracker_<geometry>.npz`` names the tensors, ``tests/golden/seeded.py`` fills them).
pytracking's own DiMP tracker runs it as built (imported from the checkout ``--pytracking`` by
``scripts/golden/reference.py``, its CUDA PrRoIPool replaced by this toolkit's); ours runs it as a user
gets it, converted by ``ltr.admin.import_pytracking`` and prepared by ``load_network`` (BatchNorm folded).
``--geometry`` picks the parameter set on both sides: ``dimp50`` (288-pixel crops, 5 refinement steps) or
``super_dimp`` (352 pixels, 10 steps); ``nce_plus_tiny`` times ours alone on the demo's CPU-sized network
(random weights), which pytracking has no counterpart of; with ``--against KEY=VALUE ...`` the same setting's
network with those ``NetConfig`` fields changed (e.g. ``box_mod_channels=32,32``) runs first, as the
baseline the ratios are taken against; ``--fixed-cost`` is ``--against fixed_clf_features=false
fixed_box_features=false`` (the network without its fixed colour and gradient channels).

Every frame takes the full path. On random weights the score map is nearly flat, so DiMP's advanced
localisation finds a second peak almost as high as the first and calls the frame uncertain (refined, not
learnt from) or a hard negative (an extra filter optimisation). Both trackers therefore run with the
thresholds of :data:`OPEN` (not-found -inf, distractor and hard-negative +inf): with a positive highest
score, as here, every frame is localised in full, found normal, refined and added to the sample memory, and
the filter optimiser runs every ``train_skipping`` frames as in tracking. Both trackers draw the same random
numbers (pytracking's global generator is seeded per frame as ours seeds its own), so they take the same
states and boxes; the printed state counts and box differences show it.

Each round initialises every tracker on the first frame of a 640x480 video (a textured square moving over
noise), then tracks the rest frame by frame, every tracker in turn (A, B, A, B, ..., the order reversed
every other frame): a shared machine's speed drifts within seconds, and this way a drift falls on all
trackers alike. The first ``--warmup`` frames are not timed. Printed per round and tracker: initialisation
seconds, frames per second and the ratio to the first tracker (> 1: faster); then the median ratios and our
tracker's time per stage (``StageTimer``). ``--compile`` adds our tracker with
``compile=True`` (:mod:`pytracking.tracker.dimp.compiled`; compiled during round 1's warm-up frames).
Without ``--pytracking`` only our trackers run.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ltr.admin.config import apply_overrides  # noqa: E402
from ltr.admin.import_pytracking import convert  # noqa: E402
from ltr.train_settings.dimp import SETTINGS  # noqa: E402
from pytracking.parameter.dimp import get_parameters  # noqa: E402
from pytracking.tracker.dimp import DiMPTracker, load_network, random_network  # noqa: E402
from pytracking.tracker.dimp.timing import StageTimer  # noqa: E402
from scripts.golden.reference import import_reference  # noqa: E402
from tests.golden.pytracking_format import DIMP50_KWDS, SUPER_DIMP_KWDS, write_pytracking_checkpoint  # noqa: E402
from tests.golden.seeded import tracker_golden_weights  # noqa: E402

KWDS = {"dimp50": DIMP50_KWDS, "super_dimp": SUPER_DIMP_KWDS}
#: the demo's CPU-sized network (ours only: pytracking has no such network)
TINY = "nce_plus_tiny"
#: the per-frame seed step of DiMPTracker, used for pytracking's global generator too
FRAME_SEED = 1_000_003
#: localisation thresholds for both trackers: every frame normal while the highest score is positive
OPEN = {
    "target_not_found_threshold": -math.inf,
    "distractor_threshold": math.inf,
    "hard_negative_threshold": math.inf,
}
STAGES = ("crop", "backbone", "classifier", "localisation", "refinement", "selection", "update")


@dataclasses.dataclass
class Timed:
    """A tracker under a name: ``initialize(frame, box_xywh)``, ``track(frame) -> (box xywh, state)``."""

    name: str
    initialize: Callable[[np.ndarray, np.ndarray], None]
    track: Callable[[np.ndarray], tuple[np.ndarray, str]]
    timer: StageTimer | None = None


def make_video(num_frames: int, width: int = 640, height: int = 480) -> tuple[list[np.ndarray], np.ndarray]:
    """Frames (H, W, 3) uint8 and the initial xywh box of a textured square moving over a noise background."""
    rng = np.random.default_rng(0)
    background = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    texture = rng.integers(0, 255, (60, 60, 3), dtype=np.uint8)
    frames = []
    for i in range(num_frames):
        frame = np.roll(background, 2 * i, axis=1)
        x, y, _, _ = video_box(i).astype(int)
        frame[y : y + 60, x : x + 60] = texture
        frames.append(frame)
    return frames, video_box(0)


def video_box(i: int) -> np.ndarray:
    """The xywh box of the square in frame ``i`` of :func:`make_video`."""
    return np.array([200.0 + 4 * i % 300, 150.0 + 2 * i % 200, 60.0, 60.0])


def our_trackers(
    geometry: str,
    seed: int,
    state: dict,
    folder: Path,
    compile_too: bool,
    against: Sequence[str] = (),
) -> list[Timed]:
    """Our tracker on the converted network, or for ``TINY`` on the tiny network with random weights (and,
    with ``compile_too``, the same with ``compile=True``; with ``against``, first the tiny network with those
    ``key=value`` changes to its ``NetConfig``)."""
    if geometry == TINY:
        loaded = random_network(TINY)
    else:
        src = write_pytracking_checkpoint(folder / f"{geometry}.pth.tar", state, KWDS[geometry])
        loaded = load_network(convert(src, folder / "converted.pth.tar", geometry))
    params = dataclasses.replace(get_parameters(geometry), seed=seed, **OPEN)
    variants = [("ours", loaded, params)]
    if compile_too:
        variants.append(("ours compiled", loaded, dataclasses.replace(params, compile=True)))
    if against:
        net_config = SETTINGS[TINY]().net
        changed = apply_overrides(net_config, against)
        fields = {
            f.name: getattr(changed, f.name)
            for f in dataclasses.fields(changed)
            if getattr(changed, f.name) != getattr(net_config, f.name)
        }
        variants.insert(0, (f"ours, {' '.join(against)}", random_network(TINY, net_fields=fields), params))
    out = []
    for name, net, p in variants:
        timer = StageTimer()
        tracker = DiMPTracker(net.net, net.geometry, p, timer=timer)

        def track(frame: np.ndarray, tracker: DiMPTracker = tracker) -> tuple[np.ndarray, str]:
            box = tracker.track(frame)
            return box, tracker.debug_info["state"]

        out.append(Timed(name, tracker.initialize, track, timer))
    return out


def pytracking_tracker(checkout: Path, geometry: str, seed: int, state: dict) -> Timed:
    """pytracking's DiMP tracker with parameter set ``geometry`` (CPU) on ``dimpnet50`` with ``state``.

    Imports the checkout: call it after everything of this repository has been imported.
    """
    pt = import_reference(
        checkout,
        dimpnet="ltr.models.tracking.dimpnet",
        net_wrappers="pytracking.features.net_wrappers",
        dimp="pytracking.tracker.dimp",
        parameters=f"pytracking.parameter.dimp.{geometry}",
    )
    net = pt.dimpnet.dimpnet50(**{**KWDS[geometry], "backbone_pretrained": False})
    net.load_state_dict(state)
    net.eval()

    class Given(pt.net_wrappers.NetWithBackbone):
        def initialize(self) -> None:  # the network is already loaded
            pass

    params = pt.parameters.parameters()
    params.use_gpu = False
    params.device = "cpu"
    for key, value in OPEN.items():  # pytracking's names for these three are ours
        setattr(params, key, value)
    params.net = Given(net_path=None, use_gpu=False)
    params.net.net = net
    tracker = pt.dimp.DiMP(params)

    def initialize(frame: np.ndarray, box: np.ndarray) -> None:
        torch.manual_seed(seed)
        tracker.initialize(frame, {"init_bbox": [float(v) for v in box]})

    def track(frame: np.ndarray) -> tuple[np.ndarray, str]:
        torch.manual_seed(seed + FRAME_SEED * (tracker.frame_num + 1))
        box = tracker.track(frame)["target_bbox"]
        return np.asarray(box, dtype=np.float64), str(tracker.debug_info["flag"])

    return Timed("pytracking", initialize, track)


class Result(NamedTuple):
    """One tracker's round: init seconds, frames per second, boxes (N, 4) xywh of every tracked frame, the
    states of the timed frames, {stage: seconds} of the timed frames (our trackers)."""

    init_s: float
    fps: float
    boxes: np.ndarray
    states: Counter
    stages: dict[str, float]


def run_round(
    entries: list[Timed], frames: list[np.ndarray], init_box: np.ndarray, warmup: int
) -> list[Result]:
    """Initialise every tracker on ``frames[0]`` and track ``frames[1:]`` with each in turn, frame by frame."""
    init_s, track_s = [], [0.0] * len(entries)
    for e in entries:
        start = time.perf_counter()
        e.initialize(frames[0], init_box)
        init_s.append(time.perf_counter() - start)
    boxes: list[list[np.ndarray]] = [[] for _ in entries]
    states: list[Counter] = [Counter() for _ in entries]
    for k, frame in enumerate(frames[1:]):
        if k == warmup:
            for e in entries:
                if e.timer is not None:
                    e.timer.reset()
        order = list(enumerate(entries))
        for i, e in order if k % 2 == 0 else order[::-1]:
            start = time.perf_counter()
            box, state = e.track(frame)
            elapsed = time.perf_counter() - start
            boxes[i].append(box)
            if k >= warmup:
                track_s[i] += elapsed
                states[i][state] += 1
    timed = len(frames) - 1 - warmup
    return [
        Result(
            init_s[i],
            timed / track_s[i],
            np.stack(boxes[i]),
            states[i],
            dict(e.timer.totals) if e.timer else {},
        )
        for i, e in enumerate(entries)
    ]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pytracking", type=Path, help="a pytracking checkout: also time its DiMP tracker")
    ap.add_argument(
        "--geometry",
        choices=[*sorted(KWDS), TINY],
        default="super_dimp",
        help=f"parameter set (both sides; {TINY}: the demo's network, ours only)",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=20, help="timed frames per round and tracker")
    ap.add_argument("--warmup", type=int, default=2, help="untimed frames after initialisation")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    ap.add_argument("--compile", action="store_true", help="also time our tracker with compile=True")
    ap.add_argument(
        "--fixed-cost",
        action="store_true",
        help=f"--geometry {TINY}: time it against the same network without its fixed channels (the baseline)",
    )
    ap.add_argument(
        "--against",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help=f"--geometry {TINY}: time it against its network with these NetConfig changes (the baseline)",
    )
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.frames < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--rounds, --frames and --threads must be positive, --warmup not negative")
    if args.geometry == TINY and args.pytracking is not None:
        ap.error(f"--geometry {TINY} is ours only (pytracking has no such network): leave out --pytracking")
    if (args.fixed_cost or args.against) and args.geometry != TINY:
        ap.error(f"--fixed-cost and --against need --geometry {TINY} (ours only, random weights)")
    if args.fixed_cost and args.against:
        ap.error(
            "--fixed-cost is --against fixed_clf_features=false fixed_box_features=false: give one of them"
        )
    against = ["fixed_clf_features=false", "fixed_box_features=false"] if args.fixed_cost else args.against
    if args.compile and args.warmup < 1:
        ap.error("--compile needs --warmup >= 1 (the first tracked frame compiles)")
    torch.set_num_threads(args.threads)
    frames, init_box = make_video(1 + args.warmup + args.frames)
    seed, state = (0, {}) if args.geometry == TINY else tracker_golden_weights(args.geometry)
    with tempfile.TemporaryDirectory() as folder:
        entries = our_trackers(args.geometry, seed, state, Path(folder), args.compile, against)
    if args.pytracking is not None:
        entries.insert(0, pytracking_tracker(args.pytracking, args.geometry, seed, state))
    print(
        f"geometry {args.geometry}, torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds of "
        f"{args.frames} timed frames (+{args.warmup} warm-up) per tracker; localisation thresholds: not found "
        "-inf, distractor and hard negative +inf"
    )
    report(entries, frames, init_box, args.rounds, args.warmup)


def report(
    entries: list[Timed], frames: list[np.ndarray], init_box: np.ndarray, rounds: int, warmup: int
) -> None:
    """Run ``rounds`` rounds (:func:`run_round`) and print each tracker's line per round, then the stage times
    of every tracker with a timer and the median ratios to the first tracker."""
    first = entries[0].name
    ratios: dict[str, list[float]] = {e.name: [] for e in entries[1:]}
    stage_s: dict[str, Counter] = {e.name: Counter() for e in entries if e.timer is not None}
    for r in range(1, rounds + 1):
        results = run_round(entries, frames, init_box, warmup)
        for i, (e, res) in enumerate(zip(entries, results, strict=True)):
            if e.name in stage_s:
                stage_s[e.name].update(res.stages)
            line = f"round {r}  {e.name:<14} init {res.init_s:6.2f} s  {res.fps:6.2f} FPS"
            if i > 0:
                ratios[e.name].append(res.fps / results[0].fps)
                diff = float(np.abs(res.boxes - results[0].boxes).max())
                line += f"  {ratios[e.name][-1]:.2f}x {first}, boxes within {diff:.2g} px of {first}'s"
            print(
                line + "  states: " + ", ".join(f"{k} {v}" for k, v in sorted(res.states.items())), flush=True
            )
    for name, values in ratios.items():
        print(
            f"{name} / {first}: median {statistics.median(values):.2f}x "
            f"(rounds: {', '.join(f'{v:.2f}' for v in values)})"
        )
    timed_frames = rounds * (len(frames) - 1 - warmup)
    for name, seconds in stage_s.items():
        frame_ms = {s: 1000 * seconds[s] / timed_frames for s in STAGES}
        total = sum(frame_ms.values())
        print(
            f"{name}, ms per frame by stage: " + ", ".join(f"{s} {frame_ms[s]:.1f}" for s in STAGES), end=""
        )
        print(f" (backbone {frame_ms['backbone'] / total:.0%} of their sum, {total:.1f} ms)")


if __name__ == "__main__":
    main()
