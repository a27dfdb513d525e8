"""Brief training of the tiny Faster R-CNN on the synthetic set, cached in the workspace.

The detector is meant to be reasonable but imprecise (a few hundred SGD iterations), leaving room for the
energy head's refinement. The checkpoint is keyed by the synthetic config and the training length, so all
methods of a study reuse one detector.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ltr.actors.detection import DetectorActor
from ltr.admin.checkpoint import load_checkpoint, save_checkpoint
from ltr.detection.data import CocoImages
from ltr.detection.detector import build_tiny_detector
from ltr.detection.synthetic import CLASSES, SyntheticDetectionConfig
from ltr.trainers import LRScheduleHook, StepLoader, SummaryHook, Trainer


def detector_checkpoint_path(
    directory: Path, cfg: SyntheticDetectionConfig, iters: int, lr: float, seed: int
) -> Path:
    key = json.dumps({"data": asdict(cfg), "iters": iters, "lr": lr, "seed": seed}, sort_keys=True)
    return Path(directory) / f"detector_tiny_{hashlib.sha1(key.encode()).hexdigest()[:10]}.pth"


def warmup_cosine(step: int, total: int, warmup: int = 50) -> float:
    """LR factor of optimiser step ``step`` (0-based) of ``total``: linear warm-up over ``warmup`` steps
    times a cosine decay from 1 towards 0."""
    return min(1.0, (step + 1) / warmup) * 0.5 * (1.0 + math.cos(math.pi * step / total))


def _draw_detector_batch(
    data: CocoImages, ids: list[int], cat_to_label: dict[int, int], batch: int, gen: torch.Generator
) -> tuple[list[Tensor], list[dict[str, Tensor]]]:
    """``batch`` random train images, each flipped horizontally with probability 1/2, with torchvision
    targets (``boxes`` (K, 4) xyxy pixels, ``labels`` (K,) 1-based class indices)."""
    images, targets = [], []
    for k in torch.randint(len(ids), (batch,), generator=gen).tolist():
        image = data.image(ids[k])
        boxes = data.boxes(ids[k])
        if torch.rand((), generator=gen) < 0.5:
            image = image.flip(-1)
            boxes = torch.stack([image.shape[-1] - boxes[:, 0] - boxes[:, 2], *boxes[:, 1:].T], dim=1)
        xyxy = torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], dim=1)
        labels = torch.tensor([cat_to_label[int(c)] for c in data.categories(ids[k])], dtype=torch.long)
        images.append(image)
        targets.append({"boxes": xyxy, "labels": labels})
    return images, targets


def build_detector_trainer(
    data: CocoImages,
    *,
    image_size: int,
    iters: int,
    lr: float,
    seed: int,
    batch: int = 4,
    log_every: int = 100,
    config: dict[str, Any] | None = None,
) -> Trainer:
    """The tiny detector's trainer on the CPU: SGD (momentum 0.9, weight decay 1e-4) for ``iters`` steps with
    :func:`warmup_cosine`, a summary line every ``log_every`` steps. The initial weights come from
    ``torch.manual_seed(seed)``, the batches from a generator seeded with ``seed``."""
    torch.manual_seed(seed)
    model = build_tiny_detector(len(CLASSES), image_size)
    optimizer = torch.optim.SGD(
        [p for p in model.parameters() if p.requires_grad], lr=lr, momentum=0.9, weight_decay=1e-4
    )
    ids = data.with_boxes()
    cat_to_label = {c: i + 1 for i, c in enumerate(data.category_ids)}
    gen = torch.Generator().manual_seed(seed)
    loader = StepLoader(
        lambda: _draw_detector_batch(data, ids, cat_to_label, batch, gen),
        total_steps=iters,
        steps_per_epoch=max(1, log_every or iters),
    )
    return Trainer(
        actor=DetectorActor(model),
        net=model,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_cosine(step, iters)),
        train_loader=loader,
        epochs=loader.num_epochs,
        hooks=[LRScheduleHook(per_step=True), SummaryHook()],
        device="cpu",
        setting="detection/tiny_detector",
        config=config,
        seed=seed,
        generators={"data": gen},
        batch_size_fn=lambda b: len(b[0]),
    )


def load_or_train_tiny_detector(
    directory: Path, data: CocoImages, cfg: SyntheticDetectionConfig, *, iters: int, lr: float, seed: int
) -> nn.Module:
    """The cached tiny detector for this data/training config, trained and saved on first use."""
    path = detector_checkpoint_path(directory, cfg, iters, lr, seed)
    if path.is_file():
        model = build_tiny_detector(len(CLASSES), cfg.image_size)
        model.load_state_dict(load_checkpoint(path)["net"])
        return model.eval()
    print(f"training the tiny detector ({iters} iterations) -> {path}", flush=True)
    config = {"data": asdict(cfg), "iters": iters, "lr": lr, "seed": seed}
    trainer = build_detector_trainer(
        data, image_size=cfg.image_size, iters=iters, lr=lr, seed=seed, config=config
    )
    trainer.train()
    save_checkpoint(path, trainer.checkpoint_state())
    return trainer.net.eval()
