from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from ltr.data.config import DataConfig
from ltr.data.loader import (
    EpochSampler,
    TrainingLoader,
    build_loader,
    collate_frames,
    worker_seed,
)
from ltr.data.sampler import TrackingSampler
from ltr.dataset.registry import datasets_from_specs
from ltr.ops.boxes import box_iou, xywh_to_cxcywh
from tests.data.helpers import InMemoryDataset, draw_box, moving_boxes, textured_background

CROP = 64
B = 2


def config(**kw) -> DataConfig:
    kw.setdefault("crop_size", CROP)
    kw.setdefault("samples_per_epoch", 4)
    return DataConfig(**kw)


def check_batch(batch: dict, num_candidates: int = 128) -> None:
    fs = CROP // 16
    shapes = {
        "train_images": (3, B, 3, CROP, CROP),
        "test_images": (3, B, 3, CROP, CROP),
        "train_boxes": (3, B, 4),
        "test_boxes": (3, B, 4),
        "train_label": (3, B, fs, fs),
        "test_label": (3, B, fs, fs),
        "proposals": (3, B, num_candidates, 4),
        "proposals_rel": (3, B, num_candidates, 4),
        "proposal_log_q": (3, B, num_candidates),
    }
    assert set(batch) == set(shapes)
    for k, shape in shapes.items():
        assert tuple(batch[k].shape) == shape, k
        assert batch[k].dtype == torch.float32 and torch.isfinite(batch[k]).all(), k
    # normalised images: roughly zero-mean, unit-scale values, not raw 0..255
    assert -3.0 < batch["train_images"].min() and batch["train_images"].max() < 3.0
    # the label peaks near the box centre; the positive proposal overlaps the box
    centres = xywh_to_cxcywh(batch["test_boxes"])[..., :2] / 16
    peak = batch["test_label"].flatten(2).argmax(-1)
    inside = ((centres >= 0) & (centres <= fs - 1)).all(-1)  # peak inside the label grid
    assert ((peak % fs - centres[..., 0]).abs()[inside] <= 0.5 + 1e-4).all()
    assert ((peak // fs - centres[..., 1]).abs()[inside] <= 0.5 + 1e-4).all()
    assert (box_iou(batch["proposals"][:, :, 0], batch["test_boxes"]) > 0.5).all()


def batches(loader):
    return [{k: v.clone() for k, v in b.items()} for b in loader]


def test_collate_stacks_frame_dimension():
    a = {"x": torch.zeros(3, 5), "y": torch.zeros(2)}
    b = {"x": torch.ones(3, 5), "y": torch.ones(2)}
    out = collate_frames([a, b])
    assert out["x"].shape == (3, 2, 5) and out["y"].shape == (2, 2)
    assert (out["x"][:, 1] == 1).all() and (out["x"][:, 0] == 0).all()
    with pytest.raises(ValueError, match="keys"):
        collate_frames([a, {"x": torch.ones(3, 5)}])


def test_epoch_sampler_and_worker_seed():
    s = EpochSampler(5, epoch=2)
    assert list(s) == [10, 11, 12, 13, 14]
    s.set_epoch(0)
    assert list(s) == [0, 1, 2, 3, 4]
    assert worker_seed(10, 1, 2) == 1012
    assert len({worker_seed(10, r, w, e) for r in range(3) for w in range(4) for e in range(3)}) == 36


def test_end_to_end_0_and_1_workers_same_batches_and_epochs_differ():
    sampler = TrackingSampler.from_config(config(), [InMemoryDataset(num_frames=30)], rank=0, world_size=1)
    loader0 = TrainingLoader(sampler, batch_size=B, num_workers=0)
    loader1 = TrainingLoader(sampler, batch_size=B, num_workers=1)
    assert len(loader0) == 2
    b0, b1 = batches(loader0), batches(loader1)
    assert len(b0) == len(b1) == 2
    for x, y in zip(b0, b1, strict=True):
        check_batch(x)
        for k in x:
            torch.testing.assert_close(x[k], y[k])
    # two workers split the epoch's indices: the same batches again, so no worker repeats another's samples
    b2 = batches(TrainingLoader(sampler, batch_size=B, num_workers=2))
    for x, y in zip(b0, b2, strict=True):
        torch.testing.assert_close(x["test_images"], y["test_images"])
    loader0.set_epoch(1)
    e1 = batches(loader0)
    assert not torch.equal(e1[0]["test_boxes"], b0[0]["test_boxes"])
    assert not torch.equal(b0[0]["test_boxes"], b0[1]["test_boxes"])  # samples within an epoch differ


def test_ranks_get_different_batches():
    ds = [InMemoryDataset(num_sequences=4, num_frames=40)]
    out = []
    for rank in (0, 1):
        sampler = TrackingSampler.from_config(config(), ds, rank=rank, world_size=2)
        out.append(batches(TrainingLoader(sampler, batch_size=B, num_workers=0)))
    assert len(out[0]) == 1
    assert not torch.equal(out[0][0]["train_boxes"], out[1][0]["train_boxes"])


def write_otb_tree(root: Path, num_sequences: int = 2, num_frames: int = 24) -> Path:
    """OTB layout: <root>/<seq>/img/0001.png + groundtruth_rect.txt (comma xywh), one absent frame."""
    for k in range(num_sequences):
        seq = root / f"Seq{k}"
        (seq / "img").mkdir(parents=True)
        boxes = moving_boxes(num_frames, 96, 72, seed=k)
        background = textured_background(72, 96, seed=k)
        for i, box in enumerate(boxes):
            frame = draw_box(background.copy(), box)
            cv2.imwrite(str(seq / "img" / f"{i + 1:04d}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        lines = "\n".join(",".join(f"{v:.2f}" for v in b) for b in boxes)
        (seq / "groundtruth_rect.txt").write_text(lines + "\n")
        absent = np.zeros(num_frames, dtype=int)
        absent[5] = 1
        (seq / "absent.label").write_text("\n".join(map(str, absent)) + "\n")
    return root


def test_end_to_end_on_otb_folder_tree(tmp_path):
    folder = pytest.importorskip("ltr.dataset.folder")
    dataset = folder.FolderDataset(write_otb_tree(tmp_path / "otb"))
    sampler = TrackingSampler.from_config(config(samples_per_epoch=B), [dataset], rank=0, world_size=1)
    for i in range(6):
        seq, sel = sampler.select(sampler.generators(i)[0])
        assert 5 not in sel.train_ids + sel.test_ids  # the absent frame is never used
    (batch,) = batches(TrainingLoader(sampler, batch_size=B, num_workers=1))
    check_batch(batch)


def test_end_to_end_on_synthetic_dataset():
    synthetic = pytest.importorskip("ltr.dataset.synthetic")
    cfg = synthetic.SyntheticConfig(num_frames=40, width=160, height=120)
    dataset = synthetic.SyntheticDataset(4, seed=11, config=cfg)
    kld = {"sigmas": ((0.05,) * 4, (0.5,) * 4), "label_sigma": 0.05, "num_samples": 32}
    sampler = TrackingSampler.from_config(
        config(box_method="kld_is", box_method_kwargs=kld, samples_per_epoch=B),
        [dataset],
        rank=0,
        world_size=1,
    )
    (batch,) = batches(TrainingLoader(sampler, batch_size=B, num_workers=0, drop_last=True))
    log_p = batch.pop("proposal_log_p")
    assert log_p.shape == (3, B, 32) and (log_p <= batch["proposal_log_q"] + 10).all()
    # kld_is has no label column, so every candidate is a proposal spread around the box
    fs = CROP // 16
    assert batch["proposals"].shape == (3, B, 32, 4) and batch["test_label"].shape == (3, B, fs, fs)
    assert torch.isfinite(batch["test_images"]).all() and batch["test_images"].std() > 0.1
    assert 0.1 < batch["proposals_rel"].std() < 1.0


def test_build_loader_from_registry_specs():
    pytest.importorskip("ltr.dataset.synthetic")
    cfg = config(samples_per_epoch=B, batch_size=B, num_workers=0, datasets=("synthetic:train",))
    loader = build_loader(cfg)
    assert loader.sampler.datasets[0].name == "synthetic" and len(loader) == 1
    (batch,) = batches(loader)
    check_batch(batch)
    with pytest.raises(KeyError, match="unknown dataset"):
        datasets_from_specs(["nosuchset:train"])
