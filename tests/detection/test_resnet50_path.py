"""The paper's ResNet50-FPN code path, run for real with the explicit ``detector_weights=random`` opt-in.

No COCO and no weights file exist here, so the paper setting ``detection nce_plus`` runs on a tiny
COCO-layout set (written by the synthetic writer into COCO_DIR) with torchvision's
``fasterrcnn_resnet50_fpn(weights=None, weights_backbone=None)``. Its AP is meaningless (random detector);
what is checked is that every stage of the COCO path runs and produces sane values.
"""

import json
import math
from dataclasses import replace

import pytest
import torch
from torchvision.ops.poolers import LevelMapper

from ltr.admin.checkpoint import load_checkpoint
from ltr.admin.config import ConfigError, apply_overrides
from ltr.detection.data import CocoImages
from ltr.detection.detector import RESNET50_LEVELS, WeightsMissingError
from ltr.detection.energy import BoxScorer
from ltr.detection.pipeline import build_head, build_setup, preflight, prepare_batch, refine
from ltr.detection.run import run_setting
from ltr.detection.synthetic import SyntheticDetectionConfig, write_split
from ltr.ops.boxes import xywh_to_rel, xywh_to_xyxy, xyxy_to_xywh
from ltr.ops.prroi_pool import prroi_pool
from ltr.train_settings.detection import SETTINGS

RANDOM_R50 = [
    "detector_weights=random",
    "detector_min_size=256",  # the 128-pixel images are upscaled to 256: boxes reach more than one FPN level
    "detector_max_size=256",
    "iterations=2",
    "log_every=1",
    "max_eval_images=2",
    "max_detections=30",
    "tune_steps=false",
]


@pytest.fixture
def coco_layout(monkeypatch, tmp_path):
    """A 2+2 image COCO 2017 layout (train2017, val2017) in COCO_DIR; an empty torch hub cache."""
    root = tmp_path / "coco"
    data = SyntheticDetectionConfig(num_train=2, num_val=2, num_test=1, seed=3)
    for split in ("train", "val"):
        write_split(root, split, data)
    monkeypatch.setenv("COCO_DIR", str(root))
    monkeypatch.setenv("LTR_PATHS_FILE", str(tmp_path / "no_paths.json"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    return root


def test_random_weights_are_opt_in_only(coco_layout):
    cfg = SETTINGS["nce_plus"]()
    assert cfg.detector_weights == "coco_v1"  # the default still needs the COCO_V1 file
    with pytest.raises(WeightsMissingError, match="fasterrcnn_resnet50_fpn_coco-258fb6c6.pth"):
        preflight(cfg)
    assert preflight(apply_overrides(cfg, ["detector_weights=random"])) == coco_layout
    with pytest.raises(ConfigError, match="detector_weights"):
        apply_overrides(cfg, ["detector_weights=imagenet"])


@pytest.mark.slow
def test_paper_setting_runs_on_the_resnet50_fpn_path(coco_layout, tmp_path):
    torch.manual_seed(0)
    cfg = apply_overrides(SETTINGS["nce_plus"](), RANDOM_R50)
    assert (cfg.data, cfg.detector, cfg.pool_size, cfg.hidden, cfg.num_samples) == (
        "coco",
        "resnet50_fpn",
        7,
        1024,
        128,
    )
    workspace = tmp_path / "ws"
    payload = run_setting(cfg, setting="detection/nce_plus", workspace=workspace, log=lambda _: None)
    run = workspace / "checkpoints" / "detection" / "nce_plus"

    # training: finite NCE+ losses over 128 candidates, and the stats the method logs
    assert [h["iteration"] for h in payload["history"]] == [1, 2]
    assert all(math.isfinite(h["loss"]) and h["loss"] > 0 for h in payload["history"])
    # results.json: COCOeval's AP, AP50, AP75 for the detector, guided NMS and the refined boxes
    saved = json.loads((run / "results.json").read_text())
    assert saved["metrics"] == payload["metrics"] and saved["test_split"] == "val"
    for row in ("detector", "guided_nms", "refined"):
        values = saved["metrics"][row]
        assert set(values) == {"AP", "AP50", "AP75"}
        assert all(0.0 <= v <= 100.0 for v in values.values()), (row, values)  # -1 would mean no GT
    assert json.loads((run / "config.json").read_text())["detector_weights"] == "random"

    # the trained head reloads (weights_only) and is used on the detector's FPN features
    device = torch.device("cpu")
    setup = build_setup(cfg, workspace, device, log=lambda _: None)
    assert setup.detector.out_channels == 256 and setup.detector.levels == RESNET50_LEVELS
    head = build_head(cfg, setup.detector.out_channels)
    head.load_state_dict(load_checkpoint(run / "head.pth")["net"])
    head.eval()
    data = CocoImages(coco_layout, "val")
    ids = data.image_ids[:2]
    images = [data.image(i) for i in ids]
    prep = prepare_batch(replace(cfg, nms_rank_by="score"), setup, head, images, ids)
    assert len(prep.ref) > 0 and set(prep.index.tolist()) == {0, 1}
    assert torch.allclose(prep.scale, torch.full_like(prep.scale, 2.0))  # 128 -> 256 pixels

    # pooling: 7x7 PrRoIPool from the level torchvision's own FPN level mapper assigns (P2..P5)
    mapper = LevelMapper(k_min=2, k_max=5)
    expected = mapper([xywh_to_xyxy(prep.ref)])
    assert torch.equal(RESNET50_LEVELS.assign(prep.ref), expected)
    assert len(set(expected.tolist())) >= 2, "the boxes should span more than one FPN level"
    pooled: list[torch.Tensor] = []
    hook = head.register_forward_hook(lambda _m, args, _out: pooled.append(args[0]))
    scorer = BoxScorer(head, prep.features, setup.detector.levels, prep.ref, prep.index)
    with torch.no_grad():
        f0 = scorer(prep.ref.new_zeros(len(prep.ref), 1, 4))[:, 0]
    hook.remove()
    assert len(pooled) == len(set(expected.tolist()))  # one head call per level
    for (lv, idx, _images, _local), x in zip(scorer.groups, pooled, strict=True):
        assert x.shape == (len(idx), 256, 7, 7)
        assert (expected[idx] == lv).all()
        boxes = xywh_to_xyxy(prep.ref[idx])
        rois = torch.cat([prep.index[idx, None].float(), boxes], dim=1)
        stride = RESNET50_LEVELS.strides[lv]
        direct = prroi_pool(prep.features[lv], rois, 7, 1.0 / stride)
        # equal up to float32 rounding: the two calls batch the rois differently, so the BLAS may sum in
        # another order (2.6e-5 at values up to 111, 3-4 ulp there, on an AMD EPYC with AVX-512)
        torch.testing.assert_close(x, direct, rtol=1e-5, atol=1e-6 * float(direct.abs().max()))
        other = lv + 1 if lv + 1 < len(prep.features) else lv - 1
        wrong = prroi_pool(prep.features[other], rois, 7, 1.0 / RESNET50_LEVELS.strides[other])
        assert not torch.allclose(x, wrong, atol=1e-3)

    # refinement: Algorithm S1 moves the boxes and never lowers f
    initial = refine(cfg, head, setup.detector.levels, prep, 0.0, 0.0)
    refined = refine(cfg, head, setup.detector.levels, prep, cfg.step_pos, cfg.step_size)
    assert torch.isfinite(refined).all()
    moved = (refined - initial).abs().amax(dim=1) > 1e-4
    assert moved.float().mean() > 0.5, moved
    rel = xywh_to_rel(xyxy_to_xywh(refined) * prep.scale.repeat(1, 2), prep.ref)
    with torch.no_grad():
        f1 = scorer(rel.unsqueeze(1))[:, 0]
    assert (f1 >= f0 - 1e-3 * f0.abs().clamp(min=1.0)).all()
    assert (f1 > f0)[moved].float().mean() > 0.9
