"""pytracking's SuperDiMP train setting as its ``run(settings)`` builds it, and its sampler's draws.

Runs ``ltr/train_settings/dimp/super_dimp.py``'s ``run`` with every constructor it calls wrapped so that the
call (arguments and the line of the settings file it comes from) is recorded and then made as usual; only
the trainer is a stand-in (it records ``train``'s arguments and trains nothing), the backbone is built
without its ImageNet download (``backbone_pretrained=False``: the weights are not compared here) and the
datasets read the fixture trees of :mod:`tests.golden.sampler_fixture` (pytracking's LaSOT ``split='train'``
and GOT-10k ``vottrain`` / ``votval`` split files name thousands of sequences, so on the fixture LaSOT gets
the class's training videos as ``vid_ids`` and GOT-10k the fixture split's indices as ``seq_ids``; every
other argument is the setting's). From what ``run`` built it then records:

- ``setting_json``: one JSON document: the ``settings`` attributes (with the line that sets each), every
  recorded call, the processing objects' parameters and transforms, label and proposal shapes, both samplers'
  parameters and the constants of the frame-selection rule (read with ``ast`` from
  ``TrackingSampler.__getitem__``), the network's constructor arguments and defaults, its initial values
  (statistics of every non-backbone tensor, keyed by this toolkit's names), frozen and trained parameter
  counts, objectives, loss weights, the optimizer's groups (module, LR, parameter count) and defaults, the
  LR schedule over the 50 epochs, the loaders' and the trainer's arguments, the fixture sequences' per-frame
  visibility as pytracking's datasets read it, and the size and hash of pytracking's LaSOT train split file.
- ``draw_*``: ``--draws`` samples of the train sampler (``DiMPSampler`` as ``run`` built it, its processing
  replaced by a recorder and its datasets' ``get_frames`` by a recorder that loads no image): the dataset
  index, sequence name, train and test frame ids and the final gap (the last ``max_id - base`` it searched
  test frames with; -1 for image datasets).
- ``aug_{train,val}_{flip,gray,brightness}``: (``--augment-samples``, 6) per-frame augmentation decisions
  (train frames 0-2, test frames 0-2) of the train and val processing, recorded inside pytracking's
  transforms while its ``KLDiMPProcessing`` processes a small sample; ``flip`` is the net flip of a frame
  (the joint flip XOR the per-frame flip), ``brightness`` the brightness factor (1 where no jitter runs).

Dataset roots appear as ``<fixture>/...``. pytracking lists LaSOT classes and TrackingNet videos in directory
order, so on another file system the same seed may draw other sequences (the statistics stay the same).
``tests/train_settings/test_super_dimp_parity.py`` and ``tests/data/test_sampler_parity.py`` read it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import inspect
import json
import math
import random
import sys
import tempfile
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltr.admin.import_pytracking import DIMPNET_KEY_MAP
from scripts.golden.reference import import_reference
from tests.golden import sampler_fixture

OUT = "super_dimp_setting.npz"
SETTINGS_MODULE = "ltr.train_settings.dimp.super_dimp"
#: optional pytracking imports its dataset package makes and the setting never uses
UNUSED_IMPORTS = ("lvis", "lvis.lvis")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--draws", type=int, default=4000, help="train-sampler draws to record")
    parser.add_argument("--augment-samples", type=int, default=500, help="processed samples per processing")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of python's, numpy's and torch's generators"
    )


def plain(value: Any) -> Any:
    """JSON-able form of a recorded value (objects become their class name and simple attributes)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return "inf" if math.isinf(value) else value
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):  # an optimizer's parameter list is recorded by its length only
        return {str(k): len(v) if k == "params" else plain(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor | np.ndarray):
        return plain(np.asarray(value.detach() if isinstance(value, torch.Tensor) else value).tolist())
    if isinstance(value, torch.nn.Module | torch.optim.Optimizer | torch.optim.lr_scheduler.LRScheduler):
        return {"class": type(value).__name__}
    if not hasattr(value, "__dict__"):  # e.g. a generator of parameters
        return {"class": type(value).__name__}
    if hasattr(value, "get_name") and callable(value.get_name):  # a pytracking dataset
        return {"class": type(value).__name__, "name": value.get_name()}
    if hasattr(value, "transforms"):  # a pytracking Transform
        return {"class": type(value).__name__, "transforms": [plain(t) for t in value.transforms]}
    attrs = {
        k: plain(v)
        for k, v in vars(value).items()
        if not k.startswith("_") and isinstance(v, bool | int | float | str | list | tuple | np.ndarray)
    }
    return {"class": type(value).__name__, **attrs}


class Recorder:
    """Wraps callables so each call made from the settings file is logged with its line, then made."""

    def __init__(self, settings_file: str) -> None:
        self.settings_file = settings_file
        self.calls: list[dict[str, Any]] = []

    def line(self) -> int:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != self.settings_file:
            frame = frame.f_back
        if frame is None:
            raise RuntimeError("a recorded constructor was called from outside the settings file")
        return frame.f_lineno

    def wrap(self, name: str, fn: Callable[..., Any], make: Callable[..., Any] | None = None) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            entry = {"name": name, "line": self.line(), "args": args, "kwargs": kwargs}
            entry["result"] = (make or fn)(*args, **kwargs)
            self.calls.append(entry)
            return entry["result"]

        return call

    def find(self, name: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["name"] == name]


class ModuleView:
    """A module seen through the settings file: the named attributes are recorded wrappers."""

    def __init__(self, module: Any, wrapped: dict[str, Callable]) -> None:
        self._module = module
        self._wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return self._wrapped[name] if name in self._wrapped else getattr(self._module, name)


class TrainerStandIn:
    """pytracking's LTRTrainer as the setting calls it: keeps the arguments; ``train`` records its own."""

    def __init__(
        self, actor: Any, loaders: list, optimizer: Any, settings: Any, lr_scheduler: Any = None
    ) -> None:
        self.actor, self.loaders, self.optimizer = actor, loaders, optimizer
        self.settings, self.lr_scheduler = settings, lr_scheduler
        self.train_args: dict[str, Any] | None = None

    def train(self, max_epochs: int, load_latest: bool = False, fail_safe: bool = True) -> None:
        self.train_args = {"max_epochs": max_epochs, "load_latest": load_latest, "fail_safe": fail_safe}


class LoaderStandIn:
    """pytracking's LTRLoader arguments (the real one would start worker processes when iterated)."""

    def __init__(self, name: str, dataset: Any, **kwargs: Any) -> None:
        self.name, self.dataset, self.kwargs = name, dataset, kwargs


def source(obj: Any, checkout: Path) -> str:
    """``path:line`` of ``obj``'s definition inside the checkout."""
    obj = inspect.unwrap(obj)
    path = Path(inspect.getsourcefile(obj)).resolve().relative_to(checkout)
    return f"{path}:{inspect.getsourcelines(obj)[1]}"


def settings_lines(settings_file: str) -> dict[str, int]:
    """The line of every ``settings.<name> = ...`` in ``run``."""
    tree = ast.parse(Path(settings_file).read_text())
    run = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    lines = {}
    for node in ast.walk(run):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "settings":
                    lines[target.attr] = node.lineno
    return lines


def sampler_rule_constants(sampler_cls: type, checkout: Path) -> dict[str, Any]:
    """Constants of the frame-selection rule in ``TrackingSampler.__getitem__``, each with its line."""
    lines, start = inspect.getsourcelines(sampler_cls.__getitem__)
    tree = ast.parse(textwrap.dedent("".join(lines)))
    path = Path(inspect.getsourcefile(sampler_cls)).resolve().relative_to(checkout)
    found: dict[str, Any] = {}

    def where(node: ast.AST) -> str:
        return f"{path}:{start + node.lineno - 1}"

    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "gap_increase":
            found.setdefault("gap_increase_steps", []).append(
                {"value": node.value.value, "op": type(node.op).__name__, "source": where(node)}
            )
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right = node.left, node.comparators[0]
            if isinstance(left, ast.Call) and getattr(left.func, "id", None) == "len":
                found["min_frames"] = {
                    "value": right.value,
                    "op": type(node.ops[0]).__name__,
                    "source": where(node),
                }
            if isinstance(right, ast.BinOp) and isinstance(right.op, ast.Mult):
                factor = right.left.value
                terms = sorted(ast.unparse(t) for t in (right.right.left, right.right.right))
                found["min_visible"] = {
                    "factor": factor,
                    "of": terms,
                    "op": type(node.ops[0]).__name__,
                    "source": where(node),
                }
    return found


def split_file_digest(path: Path) -> dict[str, Any]:
    names = sorted(line.strip() for line in path.read_text().splitlines() if line.strip())
    return {"count": len(names), "sha256": hashlib.sha256("\n".join(names).encode()).hexdigest()}


def our_name(ref_name: str) -> str | None:
    for ref_prefix, our_prefix in DIMPNET_KEY_MAP:
        if ref_name.startswith(ref_prefix):
            return our_prefix + ref_name[len(ref_prefix) :]
    return None


def tensor_stats(net: torch.nn.Module) -> dict[str, dict[str, Any]]:
    """Initial values of the non-backbone parameters and buffers, keyed by this toolkit's names."""
    out = {}
    for name, t in [*net.named_parameters(), *net.named_buffers()]:
        mapped = our_name(name)
        if mapped is None or name.startswith("feature_extractor."):
            continue
        t = t.detach().double()
        out[mapped] = {
            "shape": list(t.shape),
            "mean": t.mean().item() if t.numel() else 0.0,
            "std": t.std().item() if t.numel() > 1 else 0.0,
            "min": t.min().item() if t.numel() else 0.0,
            "max": t.max().item() if t.numel() else 0.0,
            "first": t.flatten()[:4].tolist(),
        }
    return out


def network_record(ref: Any, actor: Any, optimizer: Any, scheduler: Any, checkout: Path) -> dict[str, Any]:
    net = actor.net
    net.train()  # pytracking's Backbone.train sets requires_grad=False and eval mode on the frozen layers
    names = {id(p): n for n, p in net.named_parameters()}
    groups = []
    in_groups = set()
    modules = [(n, {id(p) for p in m.parameters()}) for n, m in net.named_modules()]
    for g in optimizer.param_groups:
        param_names = [names[id(p)] for p in g["params"]]
        in_groups.update(param_names)
        ids = {id(p) for p in g["params"]}
        groups.append(
            {
                # the module whose parameters the setting passed: the shortest one holding exactly these
                "module": min((n for n, m in modules if m == ids), key=len),
                "our_param": our_name(param_names[0]),
                "lr": g["lr"],
                "numel": sum(p.numel() for p in g["params"]),
                "trainable": all(p.requires_grad for p in g["params"]),
            }
        )
    backbone = net.feature_extractor
    children = dict(backbone.named_children())
    frozen_modules = [
        n
        for n, m in children.items()
        if list(m.parameters()) and not any(p.requires_grad for p in m.parameters())
    ]
    bn_eval = {
        n: all(not b.training for b in m.modules() if isinstance(b, torch.nn.BatchNorm2d))
        for n, m in children.items()
        if any(isinstance(b, torch.nn.BatchNorm2d) for b in m.modules())
    }
    not_updated = sorted(
        {".".join(n.split(".")[:2]) for n, _ in net.named_parameters() if n not in in_groups}
    )
    lrs = []
    for _ in range(50):  # the LR of each epoch: pytracking steps the scheduler after every epoch
        lrs.append([g["lr"] for g in optimizer.param_groups])
        scheduler.step()
    opt = net.classifier.filter_optimizer
    signature = inspect.signature(ref.dimpnet.dimpnet50)
    return {
        "dimpnet50_defaults": {k: plain(p.default) for k, p in signature.parameters.items()},
        "dimpnet50_source": source(ref.dimpnet.dimpnet50, checkout),
        "filter_optimizer_class": type(opt).__name__,
        "filter_optimizer_defaults": {
            k: plain(p.default)
            for k, p in inspect.signature(type(opt).__init__).parameters.items()
            if k != "self"
        },
        "filter_optimizer_source": source(type(opt), checkout),
        "filter_optimizer": {
            "num_iter": opt.num_iter,
            "feat_stride": opt.feat_stride,
            "min_filter_reg": opt.min_filter_reg,
            "detach_length": plain(opt.detach_length),
            "alpha_eps": opt.alpha_eps,
            "num_dist_bins": opt.distance_map.num_bins,
            "bin_displacement": opt.distance_map.bin_displacement,
        },
        "feature_norm_scale": next(
            m.scale
            for m in net.classifier.feature_extractor.modules()
            if type(m).__name__ == "InstanceL2Norm"
        ),
        "feature_layers": [type(m).__name__ for m in net.classifier.feature_extractor],
        "initializer": {
            "class": type(net.classifier.filter_initializer).__name__,
            "filter_norm": net.classifier.filter_initializer.filter_norm,
        },
        "classification_layer": net.classification_layer,
        "bb_regressor_layer": list(net.bb_regressor_layer),
        "init": tensor_stats(net),
        "optimizer_class": type(optimizer).__name__,
        "optimizer_defaults": plain({k: v for k, v in optimizer.defaults.items() if k != "params"}),
        "optimizer_groups": groups,
        "not_updated": not_updated,
        "not_updated_numel": sum(p.numel() for n, p in net.named_parameters() if n not in in_groups),
        "frozen_modules": frozen_modules,
        "frozen_numel": sum(p.numel() for p in net.parameters() if not p.requires_grad),
        "frozen_bn_eval": bn_eval,
        "scheduler": {
            "class": type(scheduler).__name__,
            "step_size": scheduler.step_size,
            "gamma": scheduler.gamma,
        },
        "epoch_lrs": lrs,
    }


def processing_record(proc: Any) -> dict[str, Any]:
    box = torch.tensor([10.0, 12.0, 40.0, 30.0])
    proposals, proposal_density, gt_density = proc._generate_proposals(box)
    label = proc._generate_label_function(box.view(1, 4))
    attrs = (
        "search_area_factor",
        "output_sz",
        "center_jitter_factor",
        "scale_jitter_factor",
        "crop_type",
        "mode",
        "max_scale_change",
        "proposal_params",
        "label_function_params",
        "label_density_params",
    )
    return {
        "class": type(proc).__name__,
        **{a: plain(getattr(proc, a)) for a in attrs},
        "transform": {k: plain(v) for k, v in proc.transform.items()},
        "num_proposals": int(proposals.shape[0]),
        "proposal_density_positive": bool((proposal_density > 0).all()),
        "label_shape": list(label.shape),
    }


def sampler_record(s: Any) -> dict[str, Any]:
    return {
        "class": type(s).__name__,
        "datasets": [d.get_name() for d in s.datasets],
        "dataset_classes": [type(d).__name__ for d in s.datasets],
        "p_datasets": s.p_datasets,
        "samples_per_epoch": s.samples_per_epoch,
        "max_gap": s.max_gap,
        "num_test_frames": s.num_test_frames,
        "num_train_frames": s.num_train_frames,
        "frame_sample_mode": s.frame_sample_mode,
    }


def sequence_name(dataset: Any, seq_id: int) -> str:
    entry = dataset.sequence_list[seq_id]
    return str(entry[1] if isinstance(entry, tuple) else entry)


def visibility(datasets: list) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {}
    for d in datasets:
        per = out.setdefault(d.get_name(), {})
        for seq_id in range(d.get_num_sequences()):
            per[sequence_name(d, seq_id)] = [int(v) for v in d.get_sequence_info(seq_id)["visible"]]
    return out


def record_draws(sampler: Any, count: int) -> dict[str, np.ndarray]:
    """``count`` draws of pytracking's sampler: its datasets return no images, its processing is bypassed."""
    log: dict[str, Any] = {}
    for d in sampler.datasets:

        def get_frames(seq_id: int, frame_ids: list, anno: Any = None, d: Any = d) -> tuple:
            log.setdefault("frames", []).append(list(frame_ids))
            log["sequence"] = sequence_name(d, seq_id)
            log["dataset"] = sampler.datasets.index(d)
            return [None] * len(frame_ids), {"bbox": [torch.zeros(4)] * len(frame_ids)}, {}

        d.get_frames = get_frames
    searched = sampler._sample_visible_ids

    def sample_visible_ids(visible: Any, num_ids: int = 1, min_id: Any = None, max_id: Any = None) -> Any:
        log["last_max_id"] = max_id
        return searched(visible, num_ids=num_ids, min_id=min_id, max_id=max_id)

    sampler._sample_visible_ids = sample_visible_ids
    sampler.processing = lambda data: None
    rows = {"draw_dataset": [], "draw_sequence": [], "draw_train": [], "draw_test": [], "draw_gap": []}
    for index in range(count):
        log.clear()
        sampler[index]
        train, test = log["frames"]
        is_video = sampler.datasets[log["dataset"]].is_video_sequence()
        rows["draw_dataset"].append(log["dataset"])
        rows["draw_sequence"].append(log["sequence"])
        rows["draw_train"].append(train)
        rows["draw_test"].append(test)
        rows["draw_gap"].append(log["last_max_id"] - train[0] if is_video else -1)
    return {
        "draw_dataset": np.array(rows["draw_dataset"], dtype=np.int8),
        "draw_sequence": np.array(rows["draw_sequence"]),
        "draw_train": np.array(rows["draw_train"], dtype=np.int32),
        "draw_test": np.array(rows["draw_test"], dtype=np.int32),
        "draw_gap": np.array(rows["draw_gap"], dtype=np.int32),
    }


def record_augmentation(ref: Any, proc: Any, count: int, prefix: str) -> dict[str, np.ndarray]:
    """Per-frame decisions of ``proc``'s transforms over ``count`` processed samples (3 train + 3 test)."""
    calls: dict[int, list] = {}
    kinds: dict[int, str] = {}
    for key in ("joint", "train", "test"):
        transform = proc.transform[key]
        for t in transform.transforms if transform is not None else ():
            if id(t) in kinds:
                continue
            kinds[id(t)] = f"{key}:{type(t).__name__}"
            original = t.transform_image

            def transform_image(image: Any, *params: Any, original: Any = original, key: int = id(t)) -> Any:
                calls.setdefault(key, []).append(params[0] if params else None)
                return original(image, *params)

            t.transform_image = transform_image
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    flips, grays, brightness = [], [], []
    for _ in range(count):
        calls.clear()
        box = torch.tensor([30.0, 20.0, 16.0, 12.0])
        data = ref.tensordict.TensorDict(
            {
                "train_images": [image.copy() for _ in range(3)],
                "test_images": [image.copy() for _ in range(3)],
                "train_anno": [box.clone() for _ in range(3)],
                "test_anno": [box.clone() for _ in range(3)],
            }
        )
        proc(data)
        by_kind = {kinds[k]: v for k, v in calls.items()}
        flip = np.zeros(6, dtype=bool)
        for kind, values in by_kind.items():
            if kind.endswith("RandomHorizontalFlip"):
                flip ^= np.array(values, dtype=bool)
        gray = np.array(by_kind.get("joint:ToGrayscale", [False] * 6), dtype=bool)
        bright = np.array(by_kind.get("train:ToTensorAndJitter", [1.0] * 6), dtype=np.float64)
        flips.append(flip)
        grays.append(gray)
        brightness.append(bright)
    return {
        f"aug_{prefix}_flip": np.array(flips),
        f"aug_{prefix}_gray": np.array(grays),
        f"aug_{prefix}_brightness": np.array(brightness),
    }


def run(args: argparse.Namespace) -> dict[str, np.ndarray]:
    checkout = Path(args.pytracking).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        roots = sampler_fixture.build_fixture(Path(tmp))
        for name in UNUSED_IMPORTS:
            stub = types.ModuleType(name)
            stub.__path__ = []
            sys.modules.setdefault(name, stub)
        ref = import_reference(
            checkout,
            settings=SETTINGS_MODULE,
            sampler="ltr.data.sampler",
            dimpnet="ltr.models.tracking.dimpnet",
            tensordict="pytracking.libs.tensordict",
        )
        return record(ref, roots, args, checkout)


def record(ref: Any, roots: sampler_fixture.FixtureRoots, args: argparse.Namespace, checkout: Path) -> dict:
    mod = ref.settings
    rec = Recorder(mod.__file__)

    def lasot(root: str, split: str) -> Any:
        if split != "train":
            raise RuntimeError(f"the setting asked for LaSOT split {split!r}; the fixture has 'train' only")
        return originals["Lasot"](root, vid_ids=list(sampler_fixture.LASOT_TRAIN_VIDEOS))

    def got10k(root: str, split: str) -> Any:
        ids = {"vottrain": sampler_fixture.GOT10K_VOTTRAIN, "votval": sampler_fixture.GOT10K_VOTVAL}[split]
        return originals["Got10k"](root, seq_ids=list(ids))

    originals = {n: getattr(mod, n) for n in ("Lasot", "Got10k", "TrackingNet", "MSCOCOSeq")}
    wrapped = {
        "Lasot": rec.wrap("Lasot", originals["Lasot"], lasot),
        "Got10k": rec.wrap("Got10k", originals["Got10k"], got10k),
        "TrackingNet": rec.wrap("TrackingNet", originals["TrackingNet"]),
        "MSCOCOSeq": rec.wrap("MSCOCOSeq", originals["MSCOCOSeq"]),
        "LTRLoader": rec.wrap("LTRLoader", LoaderStandIn),
        "LTRTrainer": rec.wrap("LTRTrainer", TrainerStandIn),
    }

    def view(name: str, attrs: tuple[str, ...], make: dict[str, Callable] | None = None) -> ModuleView:
        module = getattr(mod, name)
        fns = {a: rec.wrap(a, getattr(module, a), (make or {}).get(a)) for a in attrs}
        return ModuleView(module, fns)

    def dimpnet50(**kwargs: Any) -> Any:
        return ref.dimpnet.dimpnet50(**{**kwargs, "backbone_pretrained": False})

    lr_scheduler = ModuleView(
        mod.optim.lr_scheduler, {"StepLR": rec.wrap("StepLR", mod.optim.lr_scheduler.StepLR)}
    )
    views = {
        "processing": view("processing", ("KLDiMPProcessing",)),
        "sampler": view("sampler", ("DiMPSampler",)),
        "tfm": view(
            "tfm",
            (
                "Transform",
                "ToGrayscale",
                "RandomHorizontalFlip",
                "ToTensorAndJitter",
                "ToTensor",
                "Normalize",
            ),
        ),
        "dimpnet": view("dimpnet", ("dimpnet50",), {"dimpnet50": dimpnet50}),
        "ltr_losses": view("ltr_losses", ("LBHinge",)),
        "klreg_losses": view("klreg_losses", ("KLRegression",)),
        "tracking_actors": view("tracking_actors", ("KLDiMPActor",)),
        "optim": ModuleView(
            mod.optim, {"Adam": rec.wrap("Adam", mod.optim.Adam), "lr_scheduler": lr_scheduler}
        ),
    }
    for name, value in {**wrapped, **views}.items():
        setattr(mod, name, value)

    env = types.SimpleNamespace(
        lasot_dir=str(roots.lasot),
        got10k_dir=str(roots.got10k / "train"),  # pytracking's got10k_dir is the train folder
        trackingnet_dir=str(roots.trackingnet),
        coco_dir=str(roots.coco),
    )
    settings = types.SimpleNamespace(env=env)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    mod.run(settings)

    trainer = rec.find("LTRTrainer")[0]["result"]
    actor = trainer.actor
    loaders = {loader.name: loader for loader in trainer.loaders}
    train_sampler, val_sampler = loaders["train"].dataset, loaders["val"].dataset
    processing = {
        name: next(c["result"] for c in rec.find("KLDiMPProcessing") if c["result"] is s.processing)
        for name, s in (("train", train_sampler), ("val", val_sampler))
    }
    lasot_split = checkout / "ltr" / "data_specs" / "lasot_train_split.txt"
    doc = {
        "settings_file": str(Path(mod.__file__).resolve().relative_to(checkout)),
        "settings": {k: plain(v) for k, v in vars(settings).items() if k not in ("env", "description")},
        "settings_lines": settings_lines(mod.__file__),
        "calls": [
            {"name": c["name"], "line": c["line"], "args": plain(c["args"]), "kwargs": plain(c["kwargs"])}
            for c in rec.calls
        ],
        "processing": {k: processing_record(v) for k, v in processing.items()},
        "processing_source": source(type(processing["train"]), checkout),
        "sampler": {"train": sampler_record(train_sampler), "val": sampler_record(val_sampler)},
        "sampler_source": source(type(train_sampler).__mro__[1], checkout),
        "sampler_rules": sampler_rule_constants(type(train_sampler).__mro__[1], checkout),
        "sampler_defaults": {
            k: plain(p.default)
            for k, p in inspect.signature(type(train_sampler).__init__).parameters.items()
            if p.default is not inspect.Parameter.empty and k != "processing"
        },
        "network": network_record(ref, actor, trainer.optimizer, trainer.lr_scheduler, checkout),
        "objective": {k: plain(v) for k, v in actor.objective.items()},
        "objective_detail": {
            "test_clf": {
                "threshold": actor.objective["test_clf"].threshold,
                "clip": actor.objective["test_clf"].clip,
                "error_metric": type(actor.objective["test_clf"].error_metric).__name__,
                "reduction": actor.objective["test_clf"].error_metric.reduction,
            },
            "bb_ce": {"eps": actor.objective["bb_ce"].eps},
        },
        "loss_weight": plain(actor.loss_weight),
        "actor_class": type(actor).__name__,
        "loaders": {
            name: {"dataset": type(ld.dataset).__name__, **plain(ld.kwargs)} for name, ld in loaders.items()
        },
        "loader_order": [ld.name for ld in trainer.loaders],
        "train_args": trainer.train_args,
        "dataset_defaults": {
            name: {
                "source": source(cls, checkout),
                **{
                    k: plain(p.default)
                    for k, p in inspect.signature(cls.__init__).parameters.items()
                    if p.default is not inspect.Parameter.empty and k != "image_loader"
                },
            }
            for name, cls in originals.items()
        },
        "visibility": visibility(train_sampler.datasets + val_sampler.datasets),
        "lasot_train_split": split_file_digest(lasot_split),
        "got10k_splits": {
            s: split_file_digest(checkout / "ltr" / "data_specs" / f"got10k_vot_{s}_split.txt")
            for s in ("train", "val")
        },
        "draws": {"count": args.draws, "seed": args.seed},
    }
    arrays: dict[str, np.ndarray] = {}
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    arrays.update(record_draws(train_sampler, args.draws))
    arrays.update(record_augmentation(ref, processing["train"], args.augment_samples, "train"))
    arrays.update(record_augmentation(ref, processing["val"], args.augment_samples, "val"))
    text = json.dumps(doc, indent=1, sort_keys=True).replace(str(roots.lasot.parent), "<fixture>")
    arrays["setting_json"] = np.array(text)
    return arrays
