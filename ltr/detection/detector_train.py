"""Brief training of the tiny Faster R-CNN on the synthetic set, cached in the workspace.

The detector is meant to be reasonable but imprecise (a few hundred SGD iterations), leaving room for the
energy head's refinement. The checkpoint is keyed by the synthetic config and the training length, so all
methods of a study reuse one detector.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from ltr.admin.checkpoint import FORMAT, VERSION, load_checkpoint, save_checkpoint
from ltr.detection.data import CocoImages
from ltr.detection.detector import build_tiny_detector
from ltr.detection.synthetic import CLASSES, SyntheticDetectionConfig


def detector_checkpoint_path(
    directory: Path, cfg: SyntheticDetectionConfig, iters: int, lr: float, seed: int
) -> Path:
    key = json.dumps({"data": asdict(cfg), "iters": iters, "lr": lr, "seed": seed}, sort_keys=True)
    return Path(directory) / f"detector_tiny_{hashlib.sha1(key.encode()).hexdigest()[:10]}.pth"


def train_tiny_detector(
    data: CocoImages,
    *,
    image_size: int,
    iters: int,
    lr: float,
    seed: int,
    batch: int = 4,
    log_every: int = 100,
) -> nn.Module:
    """SGD (momentum 0.9, weight decay 1e-4, linear warm-up, cosine decay) on the train split."""
    torch.manual_seed(seed)
    model = build_tiny_detector(len(CLASSES), image_size)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=1e-4)
    ids = data.with_boxes()
    cat_to_label = {c: i + 1 for i, c in enumerate(data.category_ids)}
    gen = torch.Generator().manual_seed(seed)
    start = time.time()
    for it in range(iters):
        warm = min(1.0, (it + 1) / 50)
        for g in opt.param_groups:
            g["lr"] = lr * warm * 0.5 * (1 + torch.cos(torch.tensor(torch.pi * it / iters)).item())
        pick = torch.randint(len(ids), (batch,), generator=gen).tolist()
        images, targets = [], []
        for k in pick:
            image = data.image(ids[k])
            boxes = data.boxes(ids[k])
            if torch.rand((), generator=gen) < 0.5:  # horizontal flip
                image = image.flip(-1)
                boxes = torch.stack([image.shape[-1] - boxes[:, 0] - boxes[:, 2], *boxes[:, 1:].T], dim=1)
            xyxy = torch.cat([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]], dim=1)
            labels = torch.tensor([cat_to_label[int(c)] for c in data.categories(ids[k])], dtype=torch.long)
            images.append(image)
            targets.append({"boxes": xyxy, "labels": labels})
        losses = model(images, targets)
        loss = sum(losses.values())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log_every and (it + 1) % log_every == 0:
            print(
                f"detector it {it + 1}/{iters} loss {loss.item():.3f} ({time.time() - start:.0f}s)",
                flush=True,
            )
    return model.eval()


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
    model = train_tiny_detector(data, image_size=cfg.image_size, iters=iters, lr=lr, seed=seed)
    save_checkpoint(
        path,
        {
            "format": FORMAT,
            "version": VERSION,
            "setting": "detection/tiny_detector",
            "epoch": iters,
            "config": {"data": asdict(cfg), "iters": iters, "lr": lr, "seed": seed},
            "net": model.state_dict(),
        },
    )
    return model
