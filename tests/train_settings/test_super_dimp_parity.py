"""``dimp kld_is`` trains what pytracking's SuperDiMP setting trains: every setting value, tied to its source.

The reference side is what pytracking's ``ltr/train_settings/dimp/super_dimp.py`` ``run`` builds, recorded by
``scripts/pytracking_golden.py super_dimp_setting`` into ``tests/golden/super_dimp_setting.npz`` (each call's
arguments with its line in the settings file, the objects' attributes, the defaults of the functions it
calls, the network's initial values, the optimizer's groups, the per-frame augmentation decisions of its
processing). :data:`ROWS` is the table: one row per value, with our config path (or the code that fixes the
value), a function giving our value, one giving pytracking's from the golden, and where pytracking sets it.

Every row must be equal, except:

- ``deliberate`` rows: ours differs on purpose and says why; the row checks that our option exists.
- ``known`` rows: a difference found here and not fixed yet (the fix belongs to the processing code); the
  row is a strict xfail, so it fails loudly once the difference is fixed and the mark must go.

``dimp nce_plus`` equals ``dimp kld_is`` except in the box loss (:func:`test_nce_plus_differs_only_in_the_box_loss`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import cv2
import numpy as np
import pytest
import torch

from ltr.actors.dimp import DiMPActor
from ltr.admin.config import to_dict
from ltr.data.loader import TrainingLoader
from ltr.data.processing import DiMPProcessing
from ltr.data.transforms import to_grayscale
from ltr.dataset.lasot import lasot_official_names, lasot_test_names
from ltr.dataset.splits import split_variable
from ltr.ebm import build_method
from ltr.models.losses import ClassifierLossWeights
from ltr.models.target_classifier.features import InstanceL2Norm
from ltr.models.tracking import BOX_LAYERS, CLF_LAYER, build_dimpnet, lr_groups
from ltr.train_settings.dimp import SETTINGS
from ltr.train_settings.dimp.initial import frozen_parts
from ltr.trainers import build_adam, build_step_lr

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "super_dimp_setting.npz"
OUR_BOX_METHOD = {"KLRegression": "kld_is"}


@cache
def golden() -> dict[str, Any]:
    with np.load(GOLDEN) as z:
        doc = json.loads(str(z["setting_json"]))
        doc["aug"] = {k: z[k] for k in z.files if k.startswith("aug_")}
    return doc


@cache
def ours() -> SimpleNamespace:
    """The ``dimp kld_is`` config, its network (fresh weights, no ImageNet file) and optimizer."""
    cfg = SETTINGS["kld_is"]()
    torch.manual_seed(0)
    net = build_dimpnet(cfg.net.__class__(**{**to_dict(cfg.net), "pretrained": False}))
    frozen = frozen_parts(cfg)
    groups = [g for g in lr_groups(**to_dict(cfg.lr)) if g[0] not in frozen]
    optimizer = build_adam(net, groups, weight_decay=cfg.trainer.weight_decay)
    return SimpleNamespace(cfg=cfg, data=cfg.data, net=net, optimizer=optimizer)


# ---- reference-side helpers ---------------------------------------------------------------------------------


def settings_file(g: dict) -> str:
    return g["settings_file"]


def setting(name: str) -> tuple[Callable, Callable]:
    """(value, source) of ``settings.<name>``."""
    return (lambda g: g["settings"][name], lambda g: f"{settings_file(g)}:{g['settings_lines'][name]}")


def call(g: dict, name: str, index: int = 0) -> dict:
    return [c for c in g["calls"] if c["name"] == name][index]


def call_source(name: str, index: int = 0) -> Callable:
    return lambda g: f"{settings_file(g)}:{call(g, name, index)['line']}"


def kwarg(name: str, key: str, index: int = 0) -> tuple[Callable, Callable]:
    return (lambda g: call(g, name, index)["kwargs"][key], call_source(name, index))


def dimpnet_arg(key: str) -> tuple[Callable, Callable]:
    """A ``dimpnet50`` argument: the setting's, else the function's default."""

    def value(g: dict) -> Any:
        kwargs = call(g, "dimpnet50")["kwargs"]
        return kwargs[key] if key in kwargs else g["network"]["dimpnet50_defaults"][key]

    def where(g: dict) -> str:
        if key in call(g, "dimpnet50")["kwargs"]:
            return call_source("dimpnet50")(g)
        return f"{g['network']['dimpnet50_source']} (default)"

    return value, where


def flip_unit(flip: np.ndarray) -> str:
    """How flips are shared by a sample's 6 frames (3 train, 3 test): sample, frame set or frame."""
    if (flip == flip[:, :1]).all():
        return "sample"
    if (flip[:, :3] == flip[:, :1]).all() and (flip[:, 3:] == flip[:, 3:4]).all():
        return "frame set"
    return "frame"


def ref_units(prefix: str) -> dict[str, str]:
    aug = golden()["aug"]
    return {
        "flip": flip_unit(aug[f"aug_{prefix}_flip"]),
        "gray": flip_unit(aug[f"aug_{prefix}_gray"]) if aug[f"aug_{prefix}_gray"].any() else "none",
        "brightness": flip_unit(
            np.isclose(aug[f"aug_{prefix}_brightness"], aug[f"aug_{prefix}_brightness"][:, :1])
        )
        if not np.allclose(aug[f"aug_{prefix}_brightness"], 1.0)
        else "none",
    }


def probabilities(transform: dict, cls: str) -> list[float]:
    return [t["probability"] for t in transform["transforms"] if t["class"] == cls]


def effective_flip(g: dict, which: str) -> float:
    """Probability that a frame ends up flipped: the joint and per-frame flips compose by XOR."""
    t = g["processing"][which]["transform"]
    p = 0.0
    for q in probabilities(t["joint"], "RandomHorizontalFlip") + probabilities(
        t["train"], "RandomHorizontalFlip"
    ):
        p = p * (1 - q) + (1 - p) * q
    return p


def digest(names: list[str]) -> dict:
    names = sorted(names)
    return {"count": len(names), "sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}


def our_group(o: SimpleNamespace, param: str) -> dict:
    for group in o.optimizer.param_groups:
        if any(p is dict(o.net.named_parameters())[param] for p in group["params"]):
            return {
                "lr": group["lr"],
                "numel": sum(p.numel() for p in group["params"]),
                "name": group["name"],
            }
    raise KeyError(param)


def our_units(o: SimpleNamespace, augment: bool, samples: int = 500) -> dict[str, str]:
    """Our processing's sharing of random decisions, measured as :func:`ref_units` measures the reference's:
    ``samples`` draws of :meth:`DiMPProcessing.draw` (3 train + 3 test frames), a frame's flip being the
    whole-frame flip XOR its crop flip."""
    processing = DiMPProcessing(o.data, augment=augment)
    rng = np.random.default_rng(0)
    augs = [processing.draw(rng, 3, 3).augmentation for _ in range(samples)]
    flip = np.array([[a.joint_flip != f for f in a.frame_flips(6)] for a in augs])
    gray = np.array([[a.grayscale] * 6 for a in augs])
    brightness = np.array([a.frame_brightness(6) for a in augs])
    return {
        "flip": flip_unit(flip) if flip.any() else "none",
        "gray": flip_unit(gray) if gray.any() else "none",
        "brightness": flip_unit(np.isclose(brightness, brightness[:, :1]))
        if not np.allclose(brightness, 1.0)
        else "none",
    }


def backbone_bn_eval(net: torch.nn.Module) -> dict[str, bool]:
    children = dict(net.backbone.named_children())
    if "trunk" in children:
        children = dict(children["trunk"].named_children())
    return {
        n: all(not b.training for b in m.modules() if isinstance(b, torch.nn.modules.batchnorm._BatchNorm))
        for n, m in children.items()
        if any(isinstance(b, torch.nn.modules.batchnorm._BatchNorm) for b in m.modules())
    }


def our_frozen(o: SimpleNamespace) -> list[str]:
    names = sorted({n.split(".")[1] for n, p in o.net.named_parameters() if not p.requires_grad})
    return names


def our_epoch_lrs(o: SimpleNamespace) -> list[list[float]]:
    """The LR of each group in each epoch: our LRScheduleHook steps the scheduler after every epoch."""
    cfg = o.cfg
    opt = build_adam(o.net, lr_groups(**to_dict(cfg.lr)))  # a second optimizer: stepping it leaves o's alone
    sched = build_step_lr(opt, cfg.trainer.lr_step, cfg.trainer.lr_gamma)
    order = [our_group(o, g["our_param"])["name"] for g in golden()["network"]["optimizer_groups"]]
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # stepping the schedule without optimizer steps
        for _ in range(cfg.trainer.epochs):
            lrs = {g["name"]: g["lr"] for g in opt.param_groups}
            out.append([lrs[n] for n in order])
            sched.step()
    return out


def grayscale_like_cv2() -> str:
    img = np.random.default_rng(3).integers(0, 256, (2, 3, 17, 23), dtype=np.uint8)
    ours = to_grayscale(torch.from_numpy(img)).numpy()[:, 0]
    ref = np.stack(
        [cv2.cvtColor(np.ascontiguousarray(i.transpose(1, 2, 0)), cv2.COLOR_RGB2GRAY) for i in img]
    )
    return "cv2.COLOR_RGB2GRAY" if np.array_equal(ours, ref) else "differs from cv2.COLOR_RGB2GRAY"


# ---- the table -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One setting value: ``ours(o)`` at ``path`` against ``ref(g)`` set at ``source(g)``."""

    name: str
    path: str
    ours: Callable[[SimpleNamespace], Any]
    ref: Callable[[dict], Any]
    source: Callable[[dict], str]
    deliberate: str = ""  # why ours differs on purpose (the row then checks only that our option exists)
    known: str = ""  # a difference found and not fixed yet: strict xfail


def row(name: str, path: str, ours_fn: Callable, ref: tuple[Callable, Callable], **kw: str) -> Row:
    return Row(name, path, ours_fn, ref[0], ref[1], **kw)


def fixed(value: Any, where: str) -> tuple[Callable, Callable]:
    return (lambda g: value, lambda g: where)


def proc(which: str, key: str) -> tuple[Callable, Callable]:
    return (
        lambda g: g["processing"][which][key],
        call_source("KLDiMPProcessing", 0 if which == "train" else 1),
    )


def sampler_attr(which: str, key: str) -> tuple[Callable, Callable]:
    return (lambda g: g["sampler"][which][key], call_source("DiMPSampler", 0 if which == "train" else 1))


def loader_arg(which: str, key: str) -> tuple[Callable, Callable]:
    return (lambda g: g["loaders"][which][key], call_source("LTRLoader", 0 if which == "train" else 1))


def rule(key: str, value: Callable) -> tuple[Callable, Callable]:
    def src(g: dict) -> str:
        found = g["sampler_rules"][key]
        return (found[-1] if isinstance(found, list) else found)["source"]

    return value, src


ROWS: list[Row] = [
    # settings.* values
    row("batch_size", "data.batch_size", lambda o: o.data.batch_size, setting("batch_size")),
    row(
        "num_workers",
        "data.num_workers",
        lambda o: o.data.num_workers,
        setting("num_workers"),
        deliberate="a machine setting: our samples depend on (seed, rank, index) only, not on the worker count",
    ),
    row(
        "multi_gpu (nn.DataParallel)",
        "torchrun --nproc_per_node=N (DistributedDataParallel)",
        lambda o: False,
        setting("multi_gpu"),
    ),
    row(
        "print_interval",
        "trainer.progress (tqdm bar, every step)",
        lambda o: o.cfg.trainer.progress,
        setting("print_interval"),
        deliberate="logging only",
    ),
    row(
        "normalize_mean",
        "data.normalize_mean",
        lambda o: list(o.data.normalize_mean),
        setting("normalize_mean"),
    ),
    row(
        "normalize_std", "data.normalize_std", lambda o: list(o.data.normalize_std), setting("normalize_std")
    ),
    row(
        "search_area_factor",
        "data.search_area_factor",
        lambda o: o.data.search_area_factor,
        setting("search_area_factor"),
    ),
    row(
        "output_sigma_factor",
        "data.output_sigma_factor",
        lambda o: o.data.output_sigma_factor,
        setting("output_sigma_factor"),
    ),
    row("target_filter_sz", "data.filter_size", lambda o: o.data.filter_size, setting("target_filter_sz")),
    row(
        "target_filter_sz (network)",
        "net.filter_size",
        lambda o: o.cfg.net.filter_size,
        setting("target_filter_sz"),
    ),
    row("feature_sz", "data.feature_size", lambda o: o.data.feature_size, setting("feature_sz")),
    row("output_sz", "data.crop_size", lambda o: o.data.crop_size, setting("output_sz")),
    row(
        "center_jitter_factor",
        "data.center_jitter_train / _test",
        lambda o: {"train": o.data.center_jitter_train, "test": o.data.center_jitter_test},
        setting("center_jitter_factor"),
    ),
    row(
        "scale_jitter_factor",
        "data.scale_jitter_train / _test",
        lambda o: {"train": o.data.scale_jitter_train, "test": o.data.scale_jitter_test},
        setting("scale_jitter_factor"),
    ),
    row(
        "hinge_threshold",
        "DiMPActor(hinge_threshold=) default (train.py passes none)",
        lambda o: inspect.signature(DiMPActor.__init__).parameters["hinge_threshold"].default,
        setting("hinge_threshold"),
    ),
    # datasets
    row(
        "train datasets",
        "data.datasets",
        lambda o: list(o.data.datasets),
        (
            lambda g: [
                {"Lasot": "lasot", "Got10k": "got10k", "TrackingNet": "trackingnet", "MSCOCOSeq": "coco"}[
                    c["name"]
                ]
                + ":"
                + c["kwargs"].get("split", "train")
                for c in g["calls"][:4]
            ],
            call_source("Lasot"),
        ),
    ),
    row(
        "TrackingNet(set_ids)",
        "dataset_options['trackingnet']['chunks']",
        lambda o: o.cfg.dataset_options["trackingnet"]["chunks"],
        kwarg("TrackingNet", "set_ids"),
    ),
    row(
        "MSCOCOSeq version (its default; SuperDiMP passes none)",
        "dataset_options['coco']['version']",
        lambda o: o.cfg.dataset_options["coco"]["version"],
        (
            lambda g: g["dataset_defaults"]["MSCOCOSeq"]["version"],
            lambda g: g["dataset_defaults"]["MSCOCOSeq"]["source"],
        ),
    ),
    row(
        "dataset weights (normalised)",
        "data.dataset_weights",
        lambda o: list(
            np.asarray(o.data.dataset_weights or [1.0] * len(o.data.datasets))
            / sum(o.data.dataset_weights or [1.0] * len(o.data.datasets))
        ),
        sampler_attr("train", "p_datasets"),
    ),
    row(
        "LaSOT train split (1120 names)",
        "ltr.dataset.lasot: official names minus LASOT_TEST",
        lambda o: digest(sorted(set(lasot_official_names()) - set(lasot_test_names()))),
        (lambda g: g["lasot_train_split"], lambda g: "ltr/data_specs/lasot_train_split.txt"),
    ),
    row(
        "GOT-10k vottrain split (7086 indices)",
        f"split file from ${split_variable('got10k', 'vottrain')} or dataset_options split_file",
        lambda o: split_variable("got10k", "vottrain"),
        (
            lambda g: g["got10k_splits"]["train"]["count"],
            lambda g: "ltr/data_specs/got10k_vot_train_split.txt",
        ),
        deliberate="pytracking's split files are not shipped; our reader takes that very file (0-based indices "
        "into train/list.txt)",
    ),
    row(
        "val datasets",
        "data.val_datasets",
        lambda o: list(o.data.val_datasets),
        (lambda g: ["got10k:" + call(g, "Got10k", 1)["kwargs"]["split"]], call_source("Got10k", 1)),
    ),
    # processing (train)
    row("crop_type", "data.crop_mode", lambda o: o.data.crop_mode, proc("train", "crop_type")),
    row(
        "max_scale_change",
        "data.max_scale_change",
        lambda o: o.data.max_scale_change,
        proc("train", "max_scale_change"),
    ),
    row(
        "processing mode",
        "batch contract (S, B, ...) of ltr/data/processing.py",
        lambda o: "sequence",
        proc("train", "mode"),
    ),
    row("output_sz (processing)", "data.crop_size", lambda o: o.data.crop_size, proc("train", "output_sz")),
    row(
        "search_area_factor (processing)",
        "data.search_area_factor",
        lambda o: o.data.search_area_factor,
        proc("train", "search_area_factor"),
    ),
    row(
        "proposals per test frame",
        "data.box_method_kwargs['num_samples']",
        lambda o: o.data.box_method_kwargs["num_samples"],
        (
            lambda g: g["processing"]["train"]["proposal_params"]["boxes_per_frame"],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "proposals drawn (no mean box added)",
        "ltr.ebm KLDIS.sample",
        lambda o: (
            build_method(o.data.box_method, **o.data.box_method_kwargs).sample(torch.zeros(1, 4)).y.shape[1]
        ),
        (lambda g: g["processing"]["train"]["num_proposals"], lambda g: g["processing_source"]),
    ),
    row(
        "proposal_sigma (cx, cy, log w, log h std per component)",
        "data.box_method_kwargs['sigmas']",
        lambda o: [list(s) for s in o.data.box_method_kwargs["sigmas"]],
        (
            lambda g: [
                [c, c, s, s] for c, s in g["processing"]["train"]["proposal_params"]["proposal_sigma"]
            ],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "gt_sigma (KLD-IS label density std)",
        "data.box_method_kwargs['label_sigma']",
        lambda o: [o.data.box_method_kwargs["label_sigma"]] * 4,
        (
            lambda g: [g["processing"]["train"]["proposal_params"]["gt_sigma"][i] for i in (0, 0, 1, 1)],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "label sigma_factor",
        "data.output_sigma_factor / data.search_area_factor",
        lambda o: o.data.output_sigma_factor / o.data.search_area_factor,
        (
            lambda g: g["processing"]["train"]["label_function_params"]["sigma_factor"],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "label kernel_sz",
        "data.filter_size",
        lambda o: o.data.filter_size,
        (
            lambda g: g["processing"]["train"]["label_function_params"]["kernel_sz"],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "label feature_sz",
        "data.feature_size",
        lambda o: o.data.feature_size,
        (
            lambda g: g["processing"]["train"]["label_function_params"]["feature_sz"],
            call_source("KLDiMPProcessing"),
        ),
    ),
    row(
        "label size (end padding for the even filter)",
        "data.label_size (label_end_pad)",
        lambda o: o.data.label_size,
        (lambda g: g["processing"]["train"]["label_shape"][-1], lambda g: g["processing_source"]),
    ),
    row(
        "label_density_params (unused: no 'clf_ce' loss weight)",
        "none",
        lambda o: "unused",
        (lambda g: "unused" if "clf_ce" not in g["loss_weight"] else "used", call_source("KLDiMPActor")),
    ),
    # augmentation
    row(
        "grayscale probability",
        "data.grayscale_prob",
        lambda o: o.data.grayscale_prob,
        kwarg("ToGrayscale", "probability"),
    ),
    row(
        "grayscale conversion",
        "ltr.data.transforms.to_grayscale",
        lambda o: grayscale_like_cv2(),
        fixed("cv2.COLOR_RGB2GRAY", "ltr/data/transforms.py ToGrayscale.transform_image"),
    ),
    row(
        "grayscale shared by",
        "one decision per sample",
        lambda o: our_units(o, True)["gray"],
        (lambda g: ref_units("train")["gray"], call_source("Transform")),
    ),
    row(
        "flip probability per frame (joint XOR per-frame flip)",
        "data.flip_prob",
        lambda o: o.data.flip_prob,
        (lambda g: effective_flip(g, "train"), call_source("RandomHorizontalFlip")),
    ),
    row(
        "flip shared by",
        "data.flip_joint (False: a crop flip per frame)",
        lambda o: our_units(o, True)["flip"],
        (lambda g: ref_units("train")["flip"], call_source("RandomHorizontalFlip", 1)),
    ),
    row(
        "brightness jitter",
        "data.brightness_jitter",
        lambda o: o.data.brightness_jitter,
        (lambda g: call(g, "ToTensorAndJitter")["args"][0], call_source("ToTensorAndJitter")),
    ),
    row(
        "brightness shared by",
        "ltr.data.transforms.AugmentationDraw (per frame)",
        lambda o: our_units(o, True)["brightness"],
        (lambda g: ref_units("train")["brightness"], call_source("ToTensorAndJitter")),
    ),
    row(
        "normalisation mean",
        "data.normalize_mean",
        lambda o: list(o.data.normalize_mean),
        kwarg("Normalize", "mean"),
    ),
    row(
        "normalisation std",
        "data.normalize_std",
        lambda o: list(o.data.normalize_std),
        kwarg("Normalize", "std"),
    ),
    row(
        "validation: grayscale / flip / brightness",
        "DiMPProcessing(augment=False): grayscale and the whole-frame flip only",
        lambda o: our_units(o, False),
        (lambda g: ref_units("val"), call_source("KLDiMPProcessing", 1)),
    ),
    row(
        "validation jitter (center)",
        "data.center_jitter_train / _test (also for validation)",
        lambda o: {"train": o.data.center_jitter_train, "test": o.data.center_jitter_test},
        proc("val", "center_jitter_factor"),
    ),
    row(
        "validation jitter (scale)",
        "data.scale_jitter_train / _test (also for validation)",
        lambda o: {"train": o.data.scale_jitter_train, "test": o.data.scale_jitter_test},
        proc("val", "scale_jitter_factor"),
    ),
    row("validation crop_type", "data.crop_mode", lambda o: o.data.crop_mode, proc("val", "crop_type")),
    # sampler
    row(
        "sampler class",
        "ltr.data.sampler.TrackingSampler",
        lambda o: "DiMPSampler",
        sampler_attr("train", "class"),
    ),
    row(
        "frame_sample_mode",
        "causal (the only mode of ltr/data/sampler.py)",
        lambda o: "causal",
        sampler_attr("train", "frame_sample_mode"),
    ),
    row(
        "samples_per_epoch",
        "data.samples_per_epoch",
        lambda o: o.data.samples_per_epoch,
        sampler_attr("train", "samples_per_epoch"),
    ),
    row("max_gap", "data.max_gap", lambda o: o.data.max_gap, sampler_attr("train", "max_gap")),
    row(
        "num_train_frames",
        "data.num_train_frames",
        lambda o: o.data.num_train_frames,
        sampler_attr("train", "num_train_frames"),
    ),
    row(
        "num_test_frames",
        "data.num_test_frames",
        lambda o: o.data.num_test_frames,
        sampler_attr("train", "num_test_frames"),
    ),
    row(
        "gap increase on failure",
        "data.gap_increase",
        lambda o: o.data.gap_increase,
        rule(
            "gap_increase_steps",
            lambda g: sorted({s["value"] for s in g["sampler_rules"]["gap_increase_steps"]})[0],
        ),
    ),
    row(
        "minimum frames per video (>=)",
        "data.min_sequence_length",
        lambda o: ("GtE", o.data.min_sequence_length),
        rule(
            "min_frames",
            lambda g: (g["sampler_rules"]["min_frames"]["op"], g["sampler_rules"]["min_frames"]["value"]),
        ),
    ),
    row(
        "visible frames a video needs (more than)",
        "DataConfig.min_visible_frames (strict >)",
        lambda o: ("Gt", o.data.min_visible_frames),
        rule(
            "min_visible",
            lambda g: (
                g["sampler_rules"]["min_visible"]["op"],
                g["sampler_rules"]["min_visible"]["factor"]
                * (g["sampler"]["train"]["num_train_frames"] + g["sampler"]["train"]["num_test_frames"]),
            ),
        ),
    ),
    row("val sampler datasets", "data.val_datasets", lambda o: ["got10k"], sampler_attr("val", "datasets")),
    row(
        "val dataset weights",
        "equal weights (from_config, training=False)",
        lambda o: [1.0],
        sampler_attr("val", "p_datasets"),
    ),
    row(
        "val samples_per_epoch",
        "data.val_samples_per_epoch",
        lambda o: o.data.val_samples_per_epoch,
        sampler_attr("val", "samples_per_epoch"),
    ),
    row("val max_gap", "data.max_gap", lambda o: o.data.max_gap, sampler_attr("val", "max_gap")),
    row(
        "val num_train_frames",
        "data.num_train_frames",
        lambda o: o.data.num_train_frames,
        sampler_attr("val", "num_train_frames"),
    ),
    row(
        "val num_test_frames",
        "data.num_test_frames",
        lambda o: o.data.num_test_frames,
        sampler_attr("val", "num_test_frames"),
    ),
    # loaders and trainer
    row(
        "train loader batch_size",
        "data.batch_size",
        lambda o: o.data.batch_size,
        loader_arg("train", "batch_size"),
    ),
    row(
        "train loader drop_last",
        "TrainingLoader(drop_last=) default",
        lambda o: inspect.signature(TrainingLoader.__init__).parameters["drop_last"].default,
        loader_arg("train", "drop_last"),
    ),
    row(
        "stack_dim (frames first)",
        "batch contract (S, B, ...)",
        lambda o: 1,
        loader_arg("train", "stack_dim"),
    ),
    row(
        "train loader shuffle",
        "EpochSampler indices (ignored: every sample is drawn at random)",
        lambda o: "indices ignored",
        loader_arg("train", "shuffle"),
        deliberate="both samplers ignore the index order; ours seeds each sample from its index instead",
    ),
    row(
        "val loader batch_size",
        "data.batch_size",
        lambda o: o.data.batch_size,
        loader_arg("val", "batch_size"),
    ),
    row(
        "val loader drop_last",
        "TrainingLoader(drop_last=) default",
        lambda o: True,
        loader_arg("val", "drop_last"),
    ),
    row(
        "validation every (epochs)",
        "trainer.val_every",
        lambda o: o.cfg.trainer.val_every,
        loader_arg("val", "epoch_interval"),
    ),
    row(
        "validation samples",
        "ValidationHook (seeded: the same samples every validation)",
        lambda o: "fixed",
        fixed("fresh", "ltr/data/sampler.py TrackingSampler.__getitem__ (random draws)"),
        deliberate="ours validates on the same samples every time so validation numbers of different epochs are "
        "comparable; training is not affected",
    ),
    row(
        "epochs",
        "trainer.epochs",
        lambda o: o.cfg.trainer.epochs,
        (lambda g: g["train_args"]["max_epochs"], call_source("LTRTrainer")),
    ),
    row(
        "load_latest",
        "--resume",
        lambda o: "--resume",
        (lambda g: g["train_args"]["load_latest"], call_source("LTRTrainer")),
        deliberate="resuming is asked for explicitly; a finished run is not continued silently",
    ),
    row(
        "fail_safe",
        "none (the run stops; --resume continues from the last checkpoint)",
        lambda o: None,
        (lambda g: g["train_args"]["fail_safe"], call_source("LTRTrainer")),
        deliberate="pytracking retries after an exception; ours stops with the error",
    ),
    # network
    row(
        "backbone_pretrained",
        "net.pretrained",
        lambda o: o.cfg.net.pretrained,
        dimpnet_arg("backbone_pretrained"),
    ),
    row("filter_size", "net.filter_size", lambda o: o.cfg.net.filter_size, dimpnet_arg("filter_size")),
    row("optim_iter", "net.num_optim_iter", lambda o: o.cfg.net.num_optim_iter, dimpnet_arg("optim_iter")),
    row(
        "out_feature_dim",
        "net.clf_feature_dim",
        lambda o: o.cfg.net.clf_feature_dim,
        dimpnet_arg("out_feature_dim"),
    ),
    row(
        "optim_init_step",
        "net.optim_init_step",
        lambda o: o.cfg.net.optim_init_step,
        dimpnet_arg("optim_init_step"),
    ),
    row(
        "optim_init_reg",
        "net.optim_init_reg",
        lambda o: o.cfg.net.optim_init_reg,
        dimpnet_arg("optim_init_reg"),
    ),
    row(
        "init_gauss_sigma",
        "net.label_init_sigma",
        lambda o: o.cfg.net.label_init_sigma,
        dimpnet_arg("init_gauss_sigma"),
    ),
    row(
        "num_dist_bins", "net.num_dist_bins", lambda o: o.cfg.net.num_dist_bins, dimpnet_arg("num_dist_bins")
    ),
    row(
        "bin_displacement",
        "net.bin_displacement",
        lambda o: o.cfg.net.bin_displacement,
        dimpnet_arg("bin_displacement"),
    ),
    row(
        "mask_init_factor",
        "net.mask_init_factor",
        lambda o: o.cfg.net.mask_init_factor,
        dimpnet_arg("mask_init_factor"),
    ),
    row(
        "target_mask_act",
        "SteepestDescentGN.maps (sigmoid)",
        lambda o: "sigmoid",
        dimpnet_arg("target_mask_act"),
    ),
    row(
        "score_act",
        "SteepestDescentGN (leaky-ReLU-par residual of DiMP)",
        lambda o: "relu",
        dimpnet_arg("score_act"),
    ),
    row("act_param", "none", lambda o: None, dimpnet_arg("act_param")),
    row(
        "detach_length (no detaching)",
        "none (gradients flow through every step)",
        lambda o: "inf",
        dimpnet_arg("detach_length"),
    ),
    row("classification_layer", "CLF_LAYER", lambda o: CLF_LAYER, dimpnet_arg("classification_layer")),
    row(
        "box head layers",
        "BOX_LAYERS",
        lambda o: list(BOX_LAYERS),
        (lambda g: g["network"]["bb_regressor_layer"], lambda g: g["network"]["dimpnet50_source"]),
    ),
    row("feat_stride", "data.feature_stride", lambda o: o.data.feature_stride, dimpnet_arg("feat_stride")),
    row(
        "init_filter_norm",
        "FilterInitializer (no normalisation)",
        lambda o: False,
        dimpnet_arg("init_filter_norm"),
    ),
    row(
        "classifier feature head (clf_feat_blocks=0, final_conv, clf_feat_norm)",
        "ClassifierFeatureHead",
        lambda o: [type(m).__name__ for m in o.net.classifier.feature_head.children()],
        (lambda g: g["network"]["feature_layers"], call_source("dimpnet50")),
    ),
    row(
        "feature norm scale sqrt(1 / (512 * 4 * 4))",
        "ClassifierFeatureHead.norm.scale",
        lambda o: next(m.scale for m in o.net.modules() if isinstance(m, InstanceL2Norm)),
        (lambda g: g["network"]["feature_norm_scale"], call_source("dimpnet50")),
    ),
    row(
        "iou_input_dim",
        "net.box_mod_channels",
        lambda o: list(o.cfg.net.box_mod_channels),
        dimpnet_arg("iou_input_dim"),
    ),
    row(
        "iou_inter_dim",
        "net.box_linear_channels",
        lambda o: list(o.cfg.net.box_linear_channels),
        dimpnet_arg("iou_inter_dim"),
    ),
    row(
        "min_filter_reg",
        "net.optim_min_reg",
        lambda o: o.cfg.net.optim_min_reg,
        (
            lambda g: g["network"]["filter_optimizer"]["min_filter_reg"],
            lambda g: g["network"]["filter_optimizer_source"],
        ),
    ),
    row(
        "alpha_eps",
        "none (plain steepest descent step)",
        lambda o: 0,
        (
            lambda g: g["network"]["filter_optimizer"]["alpha_eps"],
            lambda g: g["network"]["filter_optimizer_source"],
        ),
    ),
    row(
        "frozen backbone layers",
        "net.frozen_layers (conv1 includes bn1)",
        lambda o: our_frozen(o),
        (lambda g: sorted(g["network"]["frozen_modules"]), call_source("dimpnet50")),
    ),
    row(
        "frozen parameter count",
        "net.frozen_layers",
        lambda o: sum(p.numel() for p in o.net.parameters() if not p.requires_grad),
        (lambda g: g["network"]["frozen_numel"], call_source("dimpnet50")),
    ),
    row(
        "BatchNorm in eval mode in train mode",
        "ResNetBackbone.train (frozen layers' BatchNorm stays in eval mode)",
        lambda o: backbone_bn_eval(o.net.train()),
        (
            lambda g: {k: v for k, v in g["network"]["frozen_bn_eval"].items() if k != "layer4"},
            lambda g: "ltr/models/backbone/base.py Backbone.train",
        ),
    ),
    row(
        "parts never updated besides the frozen ones",
        "not built (DIMPNET_DROPPED)",
        lambda o: [],
        (
            lambda g: sorted(
                set(g["network"]["not_updated"])
                - {f"feature_extractor.{m}" for m in g["network"]["frozen_modules"]}
            ),
            call_source("Adam"),
        ),
        deliberate="DiMP reads layer2 and layer3 only: pytracking's layer4 and fc get no gradient and are in no "
        "optimizer group, so ours does not build them",
    ),
    # losses
    row(
        "box loss (bb_ce)",
        "data.box_method",
        lambda o: o.data.box_method,
        (lambda g: OUR_BOX_METHOD[g["objective"]["bb_ce"]["class"]], call_source("KLRegression")),
    ),
    row(
        "KLRegression eps",
        "ltr.ebm.KLDIS (no eps)",
        lambda o: 0.0,
        (lambda g: g["objective_detail"]["bb_ce"]["eps"], call_source("KLRegression")),
    ),
    row(
        "LBHinge threshold",
        "DiMPActor(hinge_threshold=) default",
        lambda o: inspect.signature(DiMPActor.__init__).parameters["hinge_threshold"].default,
        (lambda g: g["objective_detail"]["test_clf"]["threshold"], call_source("LBHinge")),
    ),
    row(
        "LBHinge error metric",
        "ltr.models.losses.hinge_mse (mean squared error)",
        lambda o: ["MSELoss", "mean", None],
        (
            lambda g: [g["objective_detail"]["test_clf"][k] for k in ("error_metric", "reduction", "clip")],
            call_source("LBHinge"),
        ),
    ),
    row(
        "loss weight bb_ce",
        "box_weight",
        lambda o: o.cfg.box_weight,
        (lambda g: g["loss_weight"]["bb_ce"], call_source("KLDiMPActor")),
    ),
    row(
        "loss weight test_clf (final filter)",
        "ClassifierLossWeights.final",
        lambda o: ClassifierLossWeights().final,
        (lambda g: g["loss_weight"]["test_clf"], call_source("KLDiMPActor")),
    ),
    row(
        "loss weight test_init_clf",
        "ClassifierLossWeights.initial",
        lambda o: ClassifierLossWeights().initial,
        (lambda g: g["loss_weight"]["test_init_clf"], call_source("KLDiMPActor")),
    ),
    row(
        "loss weight test_iter_clf (spread over the intermediate iterates)",
        "ClassifierLossWeights.intermediate",
        lambda o: ClassifierLossWeights().intermediate,
        (lambda g: g["loss_weight"]["test_iter_clf"], call_source("KLDiMPActor")),
    ),
    # optimizer and schedule
    row(
        "optimizer",
        "ltr.trainers.build_adam",
        lambda o: type(o.optimizer).__name__,
        (lambda g: g["network"]["optimizer_class"], call_source("Adam")),
    ),
    row(
        "Adam betas, eps, weight decay, amsgrad",
        "build_adam defaults, trainer.weight_decay",
        lambda o: {k: o.optimizer.defaults[k] for k in ("betas", "eps", "weight_decay", "amsgrad")},
        (
            lambda g: {
                k: g["network"]["optimizer_defaults"][k] for k in ("betas", "eps", "weight_decay", "amsgrad")
            },
            call_source("Adam"),
        ),
    ),
    *[
        row(
            f"Adam group {i}: LR and parameter count",
            "lr.* (ltr.models.tracking.lr_groups)",
            lambda o, i=i: {
                k: our_group(o, golden()["network"]["optimizer_groups"][i]["our_param"])[k]
                for k in ("lr", "numel")
            },
            (
                lambda g, i=i: {k: g["network"]["optimizer_groups"][i][k] for k in ("lr", "numel")},
                call_source("Adam"),
            ),
        )
        for i in range(5)
    ],
    row(
        "Adam default lr (unused: every group sets its own)",
        "build_adam(default_lr=None): a parameter outside the groups is an error",
        lambda o: None,
        (lambda g: g["network"]["optimizer_defaults"]["lr"], call_source("Adam")),
        deliberate="no parameter falls back to a default LR in either",
    ),
    row(
        "StepLR step_size, gamma",
        "trainer.lr_step, trainer.lr_gamma",
        lambda o: {"step_size": o.cfg.trainer.lr_step, "gamma": o.cfg.trainer.lr_gamma},
        (lambda g: {k: g["network"]["scheduler"][k] for k in ("step_size", "gamma")}, call_source("StepLR")),
    ),
    row(
        "LR of every group in every epoch",
        "LRScheduleHook (a step after each epoch)",
        our_epoch_lrs,
        (lambda g: g["network"]["epoch_lrs"], lambda g: "ltr/trainers/base_trainer.py train"),
    ),
]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    return a == b


def _param(r: Row) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason=r.known)] if r.known else []
    return pytest.param(r, id=r.name, marks=marks)


@pytest.mark.parametrize("r", [_param(r) for r in ROWS])
def test_setting_value_matches_the_reference(r: Row):
    o, g = ours(), golden()
    mine, theirs, where = r.ours(o), r.ref(g), r.source(g)
    table = f"{r.name}: ours {r.path} = {mine!r}; pytracking {where} = {theirs!r}"
    if r.deliberate:  # our option exists (its getter ran above) and the row says why it differs
        return
    assert same(mine, theirs), table


def init_keys() -> list[str]:
    return sorted(golden()["network"]["init"]) if GOLDEN.is_file() else []


@pytest.mark.parametrize("key", init_keys())
def test_initial_values_match_the_reference(key: str):
    """Shapes of every non-backbone tensor; deterministic initial values exactly; random ones by their spread."""
    ref = golden()["network"]["init"][key]
    t = ours().net.state_dict()[key].detach().double()
    assert list(t.shape) == ref["shape"]
    stats = {"mean": t.mean().item(), "min": t.min().item(), "max": t.max().item()}
    deterministic = ref["std"] == 0.0 or ".optimizer." in key or t.numel() == 1
    if deterministic:
        assert t.flatten()[:4].tolist() == pytest.approx(ref["first"], abs=1e-6)
        for k in ("mean", "min", "max"):
            assert stats[k] == pytest.approx(ref[k], abs=1e-6), (key, k)
    else:
        std = t.std().item()
        assert std == pytest.approx(ref["std"], rel=0.15), (key, "std", std, ref["std"])
        assert abs(stats["mean"] - ref["mean"]) < 4 * ref["std"] / math.sqrt(t.numel()) + 1e-9, (key, "mean")


def test_the_same_tensors_outside_the_backbone():
    ref = set(golden()["network"]["init"])
    mine = {k for k in ours().net.state_dict() if not k.startswith("backbone.")}
    assert mine == ref


def test_nce_plus_differs_only_in_the_box_loss():
    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict) and k != "box_method_kwargs":
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    kld, nce = flat(to_dict(SETTINGS["kld_is"]())), flat(to_dict(SETTINGS["nce_plus"]()))
    assert {k for k in kld if kld[k] != nce[k]} == {"data.box_method", "data.box_method_kwargs"}
    assert (kld["data.box_method"], nce["data.box_method"]) == ("kld_is", "nce_plus")
    kw_kld, kw_nce = kld["data.box_method_kwargs"], nce["data.box_method_kwargs"]
    assert kw_nce["sigmas"] == kw_kld["sigmas"]  # the same noise / proposal density
    assert kw_nce["num_samples"] + 1 == kw_kld["num_samples"] == 128  # M = 128 candidates either way
