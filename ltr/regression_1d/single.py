"""One 1D-regression model on the generic trainer, used by run_training and ``benchmarks/ebm_1d.py``.

One ``Toy1DNet``, a shuffled ``DataLoader`` of ``batch_size`` (x, y) pairs, Adam, the method's loss from
:mod:`ltr.ebm` through :class:`ltr.actors.regression_1d.Regression1DActor`, all run by
:class:`ltr.trainers.Trainer` with its standard hooks (epoch summary, stats files, checkpoints, visdom).

Seeds: initial weights ``generator(seed, 0, "init")`` (the same as run 0 of an ensemble with this seed),
shuffling ``generator(seed, 0, "shuffle")`` (through the DataLoader), samples ``generator(seed, "single")``.
Both streams are checkpointed with the weights, so ``--resume`` continues exactly.

Run folder ``<workspace>/regression_1d/<setting>/dataset<d>_seed<s>/``: config.json, ``epNNNN.pth.tar`` (the
trainer's checkpoint after every epoch), stats.csv / stats.json, results.json (D_KL and timings), density.png.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from ltr.actors.regression_1d import Regression1DActor
from ltr.admin.checkpoint import latest_checkpoint, load_checkpoint
from ltr.admin.config import ConfigError, from_dict, save_json, to_dict
from ltr.admin.device import resolve_device
from ltr.admin.stats import DEFAULT_VISDOM_PORT
from ltr.models.toy1d import Toy1DNet
from ltr.regression_1d.config import Regression1DConfig
from ltr.regression_1d.data import generate, generator
from ltr.regression_1d.evaluate import evaluate_model
from ltr.trainers import Trainer, standard_hooks


def build_trainer(
    config: Regression1DConfig,
    *,
    device: str | torch.device = "cpu",
    run_dir: Path | None = None,
    setting: str = "",
    visdom: bool = False,
    visdom_port: int = DEFAULT_VISDOM_PORT,
    verbose: bool = True,
) -> Trainer:
    """The trainer of one model of ``config`` (nothing is written when ``run_dir`` is None); with ``visdom``
    every epoch's curves go to the visdom server at 127.0.0.1:``visdom_port``, env named after ``setting``."""
    net = Toy1DNet(generator=generator(config.seed, 0, "init"))
    shuffle, sample = generator(config.seed, 0, "shuffle"), generator(config.seed, "single")
    x, y = generate(config.dataset, num=config.num_train, data_seed=config.data_seed)
    loader = DataLoader(TensorDataset(x, y), batch_size=config.batch_size, shuffle=True, generator=shuffle)
    return Trainer(
        actor=Regression1DActor(net, config.build_method(), sample),
        net=net,
        optimizer=torch.optim.Adam(net.parameters(), lr=config.lr),
        train_loader=loader,
        epochs=config.epochs,
        hooks=standard_hooks(progress=False, visdom=visdom, visdom_port=visdom_port),
        device=device,
        setting=setting,
        config=to_dict(config),
        run_dir=run_dir,
        seed=config.seed,
        generators={"shuffle": shuffle, "sample": sample},
        verbose=verbose,
    )


def run_dir(workspace: Path, setting: str, config: Regression1DConfig) -> Path:
    return Path(workspace) / setting / f"dataset{config.dataset}_seed{config.seed}"


def check_resumable(folder: Path, config: Regression1DConfig) -> None:
    """Refuse to resume a run of another config (only ``epochs`` may change): the run folder is named by
    dataset and seed alone, so a changed hyperparameter would otherwise be mixed into the old run."""
    path = latest_checkpoint(folder)
    if path is None:
        return
    saved = to_dict(from_dict(Regression1DConfig, load_checkpoint(path)["config"]))
    current = to_dict(config)
    differing = sorted(k for k in current if k != "epochs" and saved.get(k) != current[k])
    if differing:
        raise ConfigError(
            f"{path}: the checkpoint was trained with a different config ({', '.join(differing)}); "
            "start a new run instead"
        )


def run_single(
    config: Regression1DConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    visdom: bool = False,
) -> dict[str, Any]:
    """run_training's entry: train (or resume), evaluate D_KL, write the run folder; returns results.json."""
    from ltr.regression_1d.report import save_density_figure

    dev = resolve_device(device)
    if dev.type == "cpu":
        # Intra-op threads only add synchronisation to ops this small (and stall badly on a busy machine).
        torch.set_num_threads(1)
    out = run_dir(workspace, setting, config)
    if resume:
        check_resumable(out, config)
    trainer = build_trainer(config, device=dev, run_dir=out, setting=setting, visdom=visdom)
    trainer.train(resume=resume)
    train = [r for r in trainer.history if r["phase"] == "train"]
    dkl, log_density = evaluate_model(trainer.net, config.dataset, config.eval_grid)
    results = {
        "setting": setting,
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "epochs": trainer.epoch,
        "dkl": dkl,
        "sec_per_epoch": sum(r["time_s"] for r in train) / max(1, len(train)),
        "final_loss": train[-1]["loss"] if train else None,
        "device": str(dev),
        "config": to_dict(config),
    }
    save_json(results, out / "results.json")
    save_density_figure(
        log_density, out / "density.png", f"{setting}, dataset {config.dataset}, D_KL {dkl:.3f}"
    )
    print(
        json.dumps({k: results[k] for k in ("setting", "dataset", "seed", "epochs", "dkl", "sec_per_epoch")})
    )
    print(f"D_KL = {dkl:.4f}  ({out / 'results.json'})")
    return results
