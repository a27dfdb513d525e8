"""Training samples per second of the DiMP data pipeline, against a straightforward per-frame baseline.

One training sample = 3 train + 3 test frames sampled, jittered, cropped to ``crop_size`` (352 by default),
augmented, normalised, plus their Gaussian labels and 128 box-head proposals per test frame (the batch
contract of :mod:`ltr.data.processing`).

Both pipelines run in this process on the same data with the same sampler:

- ours: :class:`ltr.data.processing.DiMPProcessing` -- the reference's augmentation (grayscale and the
  whole-frame flip once per sample, then a crop flip and brightness per frame), one crop call for all six
  frames, one table look-up pass for brightness + normalisation, labels and proposals for all frames;
- baseline (written here): the straightforward per-frame way -- grayscale and flip applied to the full
  frame, crop by slicing + copyMakeBorder + cv2.resize per frame, float conversion / brightness / clamp /
  normalisation as separate torch passes per frame, label and proposals computed frame by frame.

Measurements:

1. processing only, in-process, one thread (torch and OpenCV): CPU and wall ms per sample on frames
   already in memory, and the ratio baseline / ours;
2. the full loader (:class:`ltr.data.loader.TrainingLoader`, batch 8, persistent workers, the second epoch
   timed) with 0, 1 and 2 workers, on the synthetic train set rendered on the fly and on pre-rendered
   frames; plus the baseline with the same worker counts on pre-rendered frames;
3. the tracker's per-frame crop on CPU by its three routes: numpy frame (cv2), torch uint8 frame (cut to
   the region, then grid_sample) and a torch frame converted to float as a whole first.

On a shared machine the wall numbers move by +-20%: compare the ratios from one run.

    python benchmarks/data_pipeline.py [--samples 48] [--crop-size 352] [--workers 0,1,2] [--sequences 8]
"""

from __future__ import annotations

import argparse
import math
import time

import cv2
import numpy as np
import torch

from ltr.data.config import DataConfig
from ltr.data.crop import sample_target_crop
from ltr.data.loader import TrainingLoader
from ltr.data.processing import DiMPProcessing, FrameSet, jitter_boxes
from ltr.data.sampler import TrackingSampler
from ltr.dataset.base import Sequence, SequenceDataset
from ltr.dataset.synthetic import SyntheticConfig, SyntheticDataset
from ltr.ebm import build_method
from ltr.ops.boxes import rel_to_xywh


class BaselineProcessing:
    """The batch contract computed the straightforward way, frame by frame (see the module docstring)."""

    def __init__(self, config: DataConfig) -> None:
        self.config = config
        self.method = build_method(config.box_method, **dict(config.box_method_kwargs))
        self.mean = torch.tensor(config.normalize_mean).reshape(3, 1, 1)
        self.std = torch.tensor(config.normalize_std).reshape(3, 1, 1)

    def _crop(self, image: np.ndarray, box: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        cfg = self.config
        side = max(1, round(math.sqrt(box[2] * box[3]) * cfg.search_area_factor))
        height, width = image.shape[:2]
        if cfg.crop_mode != "replicate":
            shrink = min(side / width, side / height)
            side = max(1, round(side / min(max(shrink, 1.0), cfg.max_scale_change)))
        x0 = round(box[0] + box[2] / 2 - side / 2)
        y0 = round(box[1] + box[3] / 2 - side / 2)
        if cfg.crop_mode != "replicate":
            x0 = min(max(x0, 0), width - side) if side <= width else round((width - side) / 2)
            y0 = min(max(y0, 0), height - side) if side <= height else round((height - side) / 2)
        x1, y1 = x0 + side, y0 + side
        pad = (max(0, -y0), max(0, y1 - height), max(0, -x0), max(0, x1 - width))
        patch = image[max(y0, 0) : min(y1, height), max(x0, 0) : min(x1, width)]
        if patch.size == 0:  # region entirely outside: pad the nearest border row/column
            patch = image[min(max(y0, 0), height - 1) : min(max(y0, 0), height - 1) + 1, :1]
        patch = cv2.copyMakeBorder(patch, *pad, cv2.BORDER_REPLICATE) if any(pad) else patch
        patch = cv2.resize(patch, (cfg.crop_size, cfg.crop_size), interpolation=cv2.INTER_LINEAR)
        return patch, cfg.crop_size / side, np.array([x0, y0], dtype=np.float64)

    def _label(self, box: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        stride = cfg.crop_size / cfg.feature_size
        sigma = cfg.label_sigma_cells * stride
        pos = np.arange(cfg.label_size) * stride + (0.5 * stride if cfg.filter_size % 2 else 0.0)
        cx, cy = float(box[0] + box[2] / 2), float(box[1] + box[3] / 2)
        gx = np.exp(-0.5 * ((pos - cx) / sigma) ** 2)
        gy = np.exp(-0.5 * ((pos - cy) / sigma) ** 2)
        return torch.from_numpy(np.outer(gy, gx).astype(np.float32))

    def __call__(self, frames: FrameSet, rng: np.random.Generator, generator: torch.Generator) -> dict:
        cfg = self.config
        gray = rng.random() < cfg.grayscale_prob
        out: dict[str, list] = {}
        sets = (
            (
                "train",
                frames.train_images,
                frames.train_boxes,
                cfg.center_jitter_train,
                cfg.scale_jitter_train,
            ),
            ("test", frames.test_images, frames.test_boxes, cfg.center_jitter_test, cfg.scale_jitter_test),
        )
        for prefix, images, boxes, cj, sj in sets:
            flip = rng.random() < cfg.flip_prob
            brightness = rng.uniform(max(0.0, 1 - cfg.brightness_jitter), 1 + cfg.brightness_jitter)
            for image, box in zip(images, np.asarray(boxes, dtype=np.float64), strict=True):
                box = box.copy()
                if gray:
                    g = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
                    image = cv2.cvtColor(g, cv2.COLOR_GRAY2RGB)
                if flip:
                    image = np.ascontiguousarray(image[:, ::-1])
                    box[0] = image.shape[1] - box[0] - box[2]
                jittered = jitter_boxes(box[None], cj, sj, rng)[0]
                crop, scale, offset = self._crop(image, jittered)
                crop_box = torch.tensor(
                    [
                        (box[0] - offset[0]) * scale,
                        (box[1] - offset[1]) * scale,
                        box[2] * scale,
                        box[3] * scale,
                    ],
                    dtype=torch.float32,
                )
                x = torch.from_numpy(crop).permute(2, 0, 1).float().div(255.0)
                x = x.mul(brightness).clamp(0.0, 1.0)
                x = (x - self.mean) / self.std
                out.setdefault(f"{prefix}_images", []).append(x)
                out.setdefault(f"{prefix}_boxes", []).append(crop_box)
                out.setdefault(f"{prefix}_label", []).append(self._label(crop_box))
                if prefix == "test":
                    cand = self.method.sample(torch.zeros(1, 4), generator=generator)
                    out.setdefault("proposals", []).append(rel_to_xywh(cand.y[0], crop_box[None]))
                    out.setdefault("proposals_rel", []).append(cand.y[0])
                    out.setdefault("proposal_log_q", []).append(cand.log_q[0])
        return {k: torch.stack(v) for k, v in out.items()}


class _Frames:
    """Picklable frame loader over pre-rendered frames."""

    def __init__(self, frames: list[np.ndarray]) -> None:
        self.frames = frames

    def __call__(self, i: int) -> np.ndarray:
        return self.frames[i]


class PreloadedDataset(SequenceDataset):
    """A copy of another dataset's sequences with every frame rendered/decoded once, up front."""

    def __init__(self, source: SequenceDataset) -> None:
        self.name = f"{source.name}_preloaded"
        self._seqs = {}
        for name in source.sequence_names():
            seq = source.get_sequence(name)
            frames = [seq.frame(i) for i in range(len(seq))]
            self._seqs[name] = Sequence(
                name=name,
                boxes=seq.boxes,
                frame_loader=_Frames(frames),
                visible=seq.visible,
                dataset=self.name,
            )

    def sequence_names(self) -> list[str]:
        return list(self._seqs)

    def get_sequence(self, name: str) -> Sequence:
        return self._seqs[name]


def processing_only(
    sampler: TrackingSampler, processing, frame_sets: list, seeds: list[int]
) -> tuple[float, float]:
    """CPU and wall ms per sample of ``processing`` over pre-loaded frame sets."""
    processing(frame_sets[0], *sampler.generators(10**6))  # warm-up
    c0, w0 = time.process_time(), time.perf_counter()
    for fs, seed in zip(frame_sets, seeds, strict=True):
        processing(fs, *sampler.generators(seed))
    n = len(frame_sets)
    return (time.process_time() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def loader_rate(sampler: TrackingSampler, workers: int, batch_size: int) -> float:
    """Samples per second of the second epoch of a persistent-worker loader (wall clock)."""
    loader = TrainingLoader(
        sampler, batch_size=batch_size, num_workers=workers, persistent_workers=workers > 0
    )
    for _ in loader:  # epoch 0: worker start-up, caches
        pass
    loader.set_epoch(1)
    t0 = time.perf_counter()
    n = 0
    for batch in loader:
        n += batch["test_images"].shape[1]
    rate = n / (time.perf_counter() - t0)
    del loader
    return rate


def tracker_crop_ms(repeats: int = 30) -> dict[str, float]:
    """Wall ms of one 352-pixel tracker crop of a 1280x720 uint8 frame (inside_major), three routes."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, size=(720, 1280, 3), dtype=np.uint8)
    box = np.array([600.0, 300.0, 80.0, 60.0])
    chw = torch.from_numpy(frame).permute(2, 0, 1)

    def numpy_route():
        crop, _ = sample_target_crop(frame, box, 6.0, 352, "inside_major", 1.5)
        return torch.from_numpy(crop).permute(2, 0, 1).float()

    def torch_route():
        return sample_target_crop(chw, torch.from_numpy(box), 6.0, 352, "inside_major", 1.5)

    def whole_frame_route():
        return sample_target_crop(chw.float(), torch.from_numpy(box), 6.0, 352, "inside_major", 1.5)

    out = {}
    for name, fn in (
        ("numpy (cv2)", numpy_route),
        ("torch, sliced", torch_route),
        ("torch, whole", whole_frame_route),
    ):
        fn()
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        out[name] = (time.perf_counter() - t0) / repeats * 1e3
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--samples", type=int, default=48, help="samples per measurement (default 48)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--crop-size", type=int, default=352)
    p.add_argument("--workers", default="0,1,2", help="comma-separated worker counts (default 0,1,2)")
    p.add_argument("--sequences", type=int, default=8, help="synthetic train sequences (default 8)")
    args = p.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]

    torch.set_num_threads(1)
    cv2.setNumThreads(1)
    cfg = DataConfig(crop_size=args.crop_size, samples_per_epoch=args.samples)
    synthetic = SyntheticDataset(args.sequences, seed=1, config=SyntheticConfig(num_frames=100))
    t0 = time.perf_counter()
    preloaded = PreloadedDataset(synthetic)
    render_s = time.perf_counter() - t0
    n_frames = sum(len(preloaded.get_sequence(n)) for n in preloaded.sequence_names())
    print(f"synthetic train set: {args.sequences} sequences, {n_frames} frames of 320x240")
    print(f"rendering all frames once: {render_s:.1f} s ({render_s / n_frames * 1e3:.1f} ms per frame)")
    print(f"crop {cfg.crop_size}, 3+3 frames, {cfg.box_method} with 128 candidates per test frame")

    ours = DiMPProcessing(cfg)
    baseline = BaselineProcessing(cfg)
    pre_sampler = TrackingSampler(
        [preloaded], ours, samples_per_epoch=args.samples, rank=0, world_size=1, seed=cfg.seed
    )
    seeds = list(range(args.samples))
    frame_sets = [pre_sampler.load_frames(*pre_sampler.select(pre_sampler.generators(s)[0])) for s in seeds]
    ours_cpu, ours_wall = processing_only(pre_sampler, ours, frame_sets, seeds)
    base_cpu, base_wall = processing_only(pre_sampler, baseline, frame_sets, seeds)
    print("\n1. processing only (frames in memory, 1 thread), ms per sample:")
    print(f"   {'':10s} {'CPU ms':>8s} {'wall ms':>8s}")
    print(f"   {'baseline':10s} {base_cpu:8.1f} {base_wall:8.1f}")
    print(f"   {'ours':10s} {ours_cpu:8.1f} {ours_wall:8.1f}")
    print(f"   ratio baseline/ours: CPU {base_cpu / ours_cpu:.2f}x, wall {base_wall / ours_wall:.2f}x")

    print(f"\n2. full loader, batch {args.batch_size}, second epoch of {args.samples} samples, wall clock:")
    print(f"   {'pipeline':10s} {'frames':>10s} {'workers':>7s} {'samples/s':>9s} {'ms/sample':>9s}")
    rates = {}
    for label, dataset, processing in (
        ("ours", synthetic, ours),
        ("ours", preloaded, ours),
        ("baseline", preloaded, baseline),
    ):
        source = "rendered" if dataset is synthetic else "in memory"
        for w in workers:
            sampler = TrackingSampler(
                [dataset], processing, samples_per_epoch=args.samples, rank=0, world_size=1, seed=cfg.seed
            )
            rate = loader_rate(sampler, w, args.batch_size)
            rates[(label, source, w)] = rate
            print(f"   {label:10s} {source:>10s} {w:7d} {rate:9.1f} {1e3 / rate:9.1f}")
    for w in workers:
        r = rates[("ours", "in memory", w)] / rates[("baseline", "in memory", w)]
        print(f"   ratio ours/baseline samples per second, frames in memory, {w} workers: {r:.2f}x")

    print("\n3. one tracker crop, 1280x720 uint8 frame -> 352 float32 CHW, CPU, 1 thread, wall ms:")
    crop_ms = tracker_crop_ms()
    for name, ms in crop_ms.items():
        print(f"   {name:14s} {ms:6.2f}  ({ms / crop_ms['numpy (cv2)']:.2f}x the numpy route)")


if __name__ == "__main__":
    main()
