"""One detection setting end to end: preflight, detector, head training, step tuning, COCO evaluation."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch

from ltr.admin.checkpoint import load_checkpoint, run_dir, save_checkpoint
from ltr.admin.config import save_json, to_dict
from ltr.admin.device import resolve_device
from ltr.detection.coco_eval import markdown_table, write_report
from ltr.detection.config import DetectionConfig
from ltr.detection.pipeline import (
    build_head,
    build_head_trainer,
    build_setup,
    evaluate_split,
    preflight,
    train_head,
)

HEAD_FILE = "head.pth"


def best_steps(metrics: dict[str, dict[str, float]], pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """The step pair whose ``refined_<pos>_<size>`` row has the highest AP (first one on ties)."""
    scored = [(metrics[f"refined_{sp:g}_{ss:g}"]["AP"], -i, (sp, ss)) for i, (sp, ss) in enumerate(pairs)]
    return max(scored)[2]


def run_setting(
    cfg: DetectionConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    log=print,
) -> dict:
    """Train the head (with ``resume``, continue from ``head.pth``: the trainer's checkpoint of the finished
    or extended run, so a finished head is only re-evaluated) and evaluate; writes the run folder."""
    preflight(cfg)  # COCO_DIR / weights errors before anything is built or written
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    dev = resolve_device(device)
    out = run_dir(workspace, setting)
    out.mkdir(parents=True, exist_ok=True)
    save_json(to_dict(cfg), out / "config.json")
    setup = build_setup(cfg, workspace, dev, log)
    head = build_head(cfg, setup.detector.out_channels).to(dev)
    head_path = out / HEAD_FILE
    trainer = build_head_trainer(cfg, setup, head, dev, setting=setting)
    resumed = resume and head_path.is_file()
    if resumed:
        trainer.load_checkpoint_state(load_checkpoint(head_path), head_path)
        log(f"resumed the head from {head_path} (iteration {trainer.global_step} of {cfg.iterations})")
    start, start_epoch = time.time(), trainer.epoch
    history = train_head(cfg, trainer)
    if not resumed or trainer.epoch > start_epoch:
        save_checkpoint(head_path, trainer.checkpoint_state())
    train_seconds = time.time() - start
    pairs = [(cfg.step_pos, cfg.step_size)]
    if cfg.tune_steps:
        pairs = [(m * cfg.step_pos, m * cfg.step_size) for m in cfg.step_grid]
    tuning = None
    rank_by = cfg.nms_rank_by
    if cfg.tune_steps and cfg.val_split != cfg.test_split:
        # pick the NMS ranking and the step lengths together on the validation split
        tuning, best = {}, None
        for mode in cfg.nms_rank_modes:
            rows, _ = evaluate_split(
                replace(cfg, nms_rank_by=mode), setup, head, cfg.val_split, pairs, dev, log
            )
            tuning[mode] = rows
            steps = best_steps(rows, pairs)
            ap = rows[f"refined_{steps[0]:g}_{steps[1]:g}"]["AP"]
            if best is None or ap > best[0]:
                best = (ap, mode, steps)
        assert best is not None
        _, rank_by, chosen = best
        metrics, _ = evaluate_split(
            replace(cfg, nms_rank_by=rank_by), setup, head, cfg.test_split, [chosen], dev, log
        )
    else:  # one split for both (COCO val): report the best of the grid, as the paper tunes on val
        metrics, _ = evaluate_split(cfg, setup, head, cfg.test_split, pairs, dev, log)
        chosen = best_steps(metrics, pairs) if len(pairs) > 1 else pairs[0]
    refined = metrics[f"refined_{chosen[0]:g}_{chosen[1]:g}"]
    rows = {"detector": metrics["detector"], "guided_nms": metrics["guided_nms"], "refined": refined}
    payload = {
        "setting": setting,
        "method": cfg.method,
        "num_samples": cfg.num_samples,
        "test_split": cfg.test_split,
        "step_pos": chosen[0],
        "step_size": chosen[1],
        "nms_rank_by": rank_by,
        "metrics": rows,
        "tuning": tuning,
        "all_test_rows": metrics,
        "train_seconds": train_seconds,
        "seconds_per_iteration": train_seconds / max(1, cfg.iterations) if not resume else None,
        "history": history,
    }
    table = f"# {setting} on {cfg.test_split}\n\n" + markdown_table(rows)
    write_report(out, payload, table)
    log(table)
    log(f"wrote {out / 'results.json'}")
    return payload
