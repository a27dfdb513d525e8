"""Set up data and the frozen detector, train the energy head, evaluate detector vs refined boxes.

Preflight (before anything is built): a COCO setting without ``COCO_DIR`` and the COCO detector without its
cached weights (unless ``detector_weights=random`` is asked for explicitly) stop at once with errors that name what to set and point to the ``*_tiny`` settings.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ltr.actors.detection import EnergyHeadActor
from ltr.admin.config import ConfigError, to_dict
from ltr.admin.paths import dataset_root
from ltr.dataset.base import DatasetError
from ltr.detection.config import DetectionConfig
from ltr.detection.data import CocoImages
from ltr.detection.detector import (
    RESNET50_LEVELS,
    TINY_LEVELS,
    FrozenDetector,
    LevelSpec,
    build_resnet50_detector,
    check_pretrained_weights,
)
from ltr.detection.energy import BoxScorer
from ltr.ebm import LossResult, build_method, gradient_ascent
from ltr.models.detection import DetectionEnergyHead
from ltr.ops.boxes import rel_to_xywh, xywh_to_xyxy, xyxy_to_xywh
from ltr.trainers import LRScheduleHook, StepLoader, SummaryHook, Trainer

Log = Callable[[str], None]


class TrainingDiverged(FloatingPointError):
    """The head's training loss became non-finite (the paper's "failed training due to numerical issues")."""


@dataclass
class Setup:
    """What a run needs besides the head: the data root and the frozen detector."""

    root: Path
    detector: FrozenDetector


def preflight(cfg: DetectionConfig) -> Path | None:
    """Check data/weights availability at once; returns the COCO root (None for synthetic data)."""
    if cfg.data == "coco" and cfg.detector != "resnet50_fpn":
        raise ConfigError("detector=tiny is trained on the synthetic set only; use data=synthetic")
    if cfg.data == "synthetic" and cfg.detector != "tiny":
        raise ConfigError("data=synthetic needs detector=tiny (the COCO detector knows no synthetic classes)")
    root = None
    if cfg.data == "coco":
        try:
            root = dataset_root("coco")
        except DatasetError as err:
            raise DatasetError(
                f"{err}. This is a paper setting on COCO 2017; for the embedded synthetic default run a "
                "*_tiny setting, e.g. `python ltr/run_training.py detection nce_plus_tiny`"
            ) from err
    if cfg.detector == "resnet50_fpn" and cfg.detector_weights != "random":
        check_pretrained_weights()
    return root


def build_setup(cfg: DetectionConfig, workspace: Path, device: torch.device, log: Log = print) -> Setup:
    """Resolve the data (generating the synthetic set if needed) and build the frozen detector."""
    root = preflight(cfg)
    if cfg.data == "synthetic":
        from ltr.detection.detector_train import load_or_train_tiny_detector
        from ltr.detection.synthetic import ensure_synthetic

        cache = Path(workspace) / "detection"
        root = ensure_synthetic(cache, cfg.synthetic)
        train = CocoImages(root, cfg.train_split)
        det_data, det_train = cfg.synthetic, train
        if cfg.detector_clean_labels and cfg.synthetic.annotation_noise > 0:
            # the same images with exact annotations (the noise has its own random stream)
            det_data = replace(cfg.synthetic, annotation_noise=0.0)
            det_train = CocoImages(ensure_synthetic(cache, det_data), cfg.train_split)
        net = load_or_train_tiny_detector(
            cache,
            det_train,
            det_data,
            iters=cfg.detector_iters,
            lr=cfg.detector_lr,
            seed=cfg.seed if cfg.detector_seed < 0 else cfg.detector_seed,
        )
        mapping = {i + 1: c for i, c in enumerate(train.category_ids)}
        detector = FrozenDetector(net, TINY_LEVELS, mapping, score_thresh=cfg.detector_score_thresh)
    else:
        if cfg.detector_weights == "random":
            log(
                "detector_weights=random: ResNet50-FPN Faster R-CNN with RANDOM weights (code-path check only)"
            )
        net = build_resnet50_detector(
            cfg.detector_weights, min_size=cfg.detector_min_size, max_size=cfg.detector_max_size
        )
        detector = FrozenDetector(net, RESNET50_LEVELS, None, score_thresh=cfg.detector_score_thresh)
    assert root is not None
    return Setup(root=root, detector=detector.to(device))


def build_head(cfg: DetectionConfig, in_channels: int) -> DetectionEnergyHead:
    return DetectionEnergyHead(in_channels=in_channels, pool_size=cfg.pool_size, hidden=cfg.hidden)


def build_loss(cfg: DetectionConfig) -> Callable[..., LossResult]:
    """The :mod:`ltr.ebm` method object of ``cfg.method`` with the config's hyperparameters."""
    m = cfg.num_samples
    if cfg.method in ("ml_is",):
        return build_method("ml_is", sigmas=cfg.sigmas, num_samples=m)
    if cfg.method == "kld_is":
        return build_method("kld_is", sigmas=cfg.sigmas, label_sigma=cfg.label_sigma, num_samples=m)
    if cfg.method == "nce":
        return build_method("nce", sigmas=cfg.sigmas, num_samples=max(1, m - 1))
    if cfg.method == "nce_plus":
        return build_method(
            "nce_plus", sigmas=cfg.sigmas, num_samples=max(1, m - 1), beta=cfg.beta, beta_mode=cfg.beta_mode
        )
    if cfg.method == "ml_mcmc":
        return build_method("ml_mcmc", num_steps=cfg.mcmc_steps, step_length=cfg.mcmc_alpha, num_samples=m)
    if cfg.method == "dsm":
        return build_method("dsm", sigma=cfg.dsm_sigma, num_samples=m)
    raise ConfigError(f"method={cfg.method!r} is not a detection method")


def _draw_head_batch(
    data: CocoImages, ids: list[int], cfg: DetectionConfig, gen: torch.Generator
) -> tuple[list[Tensor], Tensor, Tensor]:
    """``batch_images`` random train images and their GT boxes (at most ``max_boxes_per_image`` each, a
    random subset): images, (N, 4) xywh original pixels, (N,) image index (:class:`EnergyHeadActor`'s batch)."""
    pick = [ids[k] for k in torch.randint(len(ids), (cfg.batch_images,), generator=gen).tolist()]
    boxes, index = [], []
    for b, image_id in enumerate(pick):
        found = data.boxes(image_id)
        if len(found) > cfg.max_boxes_per_image:
            found = found[torch.randperm(len(found), generator=gen)[: cfg.max_boxes_per_image]]
        boxes.append(found)
        index.append(torch.full((len(found),), b, dtype=torch.long))
    return [data.image(i) for i in pick], torch.cat(boxes), torch.cat(index)


def build_head_trainer(
    cfg: DetectionConfig, setup: Setup, head: DetectionEnergyHead, device: torch.device, *, setting: str
) -> Trainer:
    """The head's trainer: ``cfg.iterations`` Adam steps on random train batches, StepLR counted in steps,
    an "epoch" (summary line, history record) every ``log_every`` steps. Nothing is written to disk.

    Data draws and the method's samples share one generator seeded with ``cfg.seed``, in the order of a
    plain loop (draw a batch, then its samples); it is checkpointed with the trainer's state.
    """
    data = CocoImages(setup.root, cfg.train_split)
    ids = data.with_boxes()
    if not ids:
        raise DatasetError(f"{data.root}: split {cfg.train_split} has no usable boxes")
    gen = torch.Generator().manual_seed(cfg.seed)
    loader = StepLoader(
        lambda: _draw_head_batch(data, ids, cfg, gen),
        total_steps=cfg.iterations,
        steps_per_epoch=max(1, cfg.log_every or cfg.iterations),
    )
    optimizer = torch.optim.Adam(head.parameters(), lr=cfg.lr)
    return Trainer(
        actor=EnergyHeadActor(head, setup.detector, build_loss(cfg), gen),
        net=head,
        optimizer=optimizer,
        scheduler=torch.optim.lr_scheduler.StepLR(optimizer, step_size=cfg.lr_step, gamma=cfg.lr_gamma),
        train_loader=loader,
        epochs=loader.num_epochs,
        hooks=[LRScheduleHook(per_step=True), SummaryHook()],
        device=device,
        setting=setting,
        config=to_dict(cfg),
        seed=cfg.seed,
        generators={"sample": gen},
        batch_size_fn=lambda batch: len(batch[0]),
    )


def train_head(cfg: DetectionConfig, trainer: Trainer) -> list[dict[str, Any]]:
    """Run ``trainer`` (from :func:`build_head_trainer`) to the end; returns its train records, each with
    ``iteration``, the steps done at its end. A non-finite loss raises :class:`TrainingDiverged`."""
    try:
        trainer.train()
    except FloatingPointError as err:
        raise TrainingDiverged(f"{cfg.method}: {err}") from err
    trainer.net.eval()
    history, done = [], 0
    for record in trainer.history:
        if record["phase"] == "train":
            done += record["steps"]
            history.append({"iteration": done, **record})
    return history


@dataclass
class Prepared:
    """Detections of one image batch after guided NMS, ready for refinement (network-input pixels).

    ref: (K, 4) xywh initial boxes; index: (K,) image in batch; scale: (K, 2) (sx, sy); scores (K,);
    categories: K COCO category ids; image_ids: the batch's image ids; baseline: per image the detector's
    own boxes after standard NMS ((k, 4) xyxy original pixels, (k,) scores, k category ids).
    """

    features: list[Tensor]
    ref: Tensor
    index: Tensor
    scale: Tensor
    scores: Tensor
    categories: list[int]
    image_ids: list[int]
    baseline: list[tuple[Tensor, Tensor, list[int]]]


def _top(keep: Tensor, scores: Tensor, k: int) -> Tensor:
    return keep[torch.argsort(scores, descending=True, stable=True)[:k]]


def prepare_batch(
    cfg: DetectionConfig, setup: Setup, head: DetectionEnergyHead, images: list[Tensor], image_ids: list[int]
) -> Prepared:
    """Run the detector, score every raw detection with f, apply standard NMS (baseline) and guided NMS."""
    from ltr.detection.nms import guided_nms

    det = setup.detector
    feats, scale, raw = det.run(images)
    refs, index, scales, scores, cats, baseline = [], [], [], [], [], []
    for b, d in enumerate(raw):
        boxes, sc, lab = d["boxes"], d["scores"], d["labels"]
        ok = ((boxes[:, 2] - boxes[:, 0]) > 1e-3) & ((boxes[:, 3] - boxes[:, 1]) > 1e-3)
        boxes, sc, lab = boxes[ok], sc[ok], lab[ok]
        plain = guided_nms(boxes, sc, sc, lab, cfg.nms_iou)
        top = _top(plain.keep, plain.scores, cfg.max_detections)
        baseline.append((boxes[top], sc[top], det.category(lab[top])))
        ref_all = xyxy_to_xywh(boxes) * scale[b].repeat(2)
        if cfg.nms_rank_by == "energy" and len(boxes):
            idx = torch.full((len(boxes),), b, dtype=torch.long, device=boxes.device)
            with torch.no_grad():
                loc = BoxScorer(head, feats, det.levels, ref_all, idx)(ref_all.new_zeros(len(boxes), 1, 4))[
                    :, 0
                ]
        else:
            loc = sc
        g = guided_nms(boxes, sc, loc, lab, cfg.nms_iou)
        order = torch.argsort(g.scores, descending=True, stable=True)[: cfg.max_detections]
        keep = g.keep[order]
        refs.append(ref_all[keep])
        index.append(torch.full((len(keep),), b, dtype=torch.long, device=boxes.device))
        scales.append(scale[b].expand(len(keep), 2))
        scores.append(g.scores[order])
        cats.extend(det.category(lab[keep]))
    return Prepared(
        feats,
        torch.cat(refs),
        torch.cat(index),
        torch.cat(scales),
        torch.cat(scores),
        cats,
        image_ids,
        baseline,
    )


def refine(
    cfg: DetectionConfig,
    head: DetectionEnergyHead,
    levels: LevelSpec,
    prep: Prepared,
    step_pos: float,
    step_size: float,
) -> Tensor:
    """T steps of Algorithm S1 on all boxes of the batch at once -> (K, 4) xyxy original pixels.

    The ascent runs in the rel space around each initial box, with step lengths (step_pos, step_pos,
    step_size, step_size) and decay eta = cfg.step_decay. step_pos = step_size = 0 returns the initial boxes.
    """
    ref = prep.ref
    if len(ref) and cfg.refine_steps > 0 and (step_pos > 0 or step_size > 0):
        scorer = BoxScorer(head, prep.features, levels, ref, prep.index)
        y0 = ref.new_zeros(len(ref), 1, 4)
        steps = [step_pos, step_pos, step_size, step_size]
        res = gradient_ascent(scorer, y0, step_length=steps, num_iters=cfg.refine_steps, decay=cfg.step_decay)
        ref = rel_to_xywh(res.y[:, 0], ref)
    return xywh_to_xyxy(ref / prep.scale.repeat(1, 2))


def evaluate_split(
    cfg: DetectionConfig,
    setup: Setup,
    head: DetectionEnergyHead,
    split: str,
    step_pairs: list[tuple[float, float]],
    device: torch.device,
    log: Log = print,
) -> tuple[dict[str, dict[str, float]], dict[str, list[dict]]]:
    """COCO AP of the detector's boxes, of guided NMS alone and of refinement with each step pair.

    Returns ({row name: {"AP", "AP50", "AP75"}}, {row name: COCO results list}). Rows: ``detector``,
    ``guided_nms``, and ``refined_<step_pos>_<step_size>`` per pair.
    """
    from ltr.detection.coco_eval import evaluate, to_results

    data = CocoImages(setup.root, split)
    ids = data.image_ids[: cfg.max_eval_images] if cfg.max_eval_images > 0 else data.image_ids
    results: dict[str, list[dict]] = {"detector": [], "guided_nms": []}
    names = [f"refined_{sp:g}_{ss:g}" for sp, ss in step_pairs]
    for n in names:
        results[n] = []
    head.eval()
    start = time.time()
    for s in range(0, len(ids), cfg.eval_batch_images):
        batch_ids = ids[s : s + cfg.eval_batch_images]
        images = [data.image(i).to(device) for i in batch_ids]
        prep = prepare_batch(cfg, setup, head, images, batch_ids)
        for image_id, (boxes, sc, cats) in zip(batch_ids, prep.baseline, strict=True):
            results["detector"] += to_results(image_id, boxes, sc, cats)
        variants = [("guided_nms", 0.0, 0.0)] + [
            (n, sp, ss) for n, (sp, ss) in zip(names, step_pairs, strict=True)
        ]
        for name, sp, ss in variants:
            boxes = refine(cfg, head, setup.detector.levels, prep, sp, ss)
            for b, image_id in enumerate(batch_ids):
                sel = (prep.index == b).nonzero().squeeze(1)
                results[name] += to_results(
                    image_id, boxes[sel], prep.scores[sel], [prep.categories[i] for i in sel.tolist()]
                )
    log(f"evaluated {len(ids)} {split} images, {len(step_pairs)} step settings ({time.time() - start:.0f}s)")
    metrics = {name: evaluate(data.coco, res, ids) for name, res in results.items()}
    return metrics, results
