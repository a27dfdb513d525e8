"""The straightforward way to train one 1D-regression model (as the reference does), used by run_training.

One ``Toy1DNet`` (``nn.Module``), a shuffled ``DataLoader`` with batches of 32, the method's loss from
:mod:`ltr.ebm` on each batch, Adam. It is also the baseline of ``benchmarks/ebm_1d.py``.

Seeds: initial weights ``generator(seed, 0, "init")`` (the same as run 0 of an ensemble with this seed),
shuffling ``generator(seed, 0, "shuffle")`` (through the DataLoader), samples ``generator(seed, "single")``.

Run folder ``<workspace>/regression_1d/<setting>/dataset<d>_seed<s>/``: config.json, checkpoint.pth (after
every epoch; ``--resume`` continues from it), results.json (D_KL and timings), density.png.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from ltr.admin.config import ConfigError, from_dict, save_json, to_dict
from ltr.admin.device import resolve_device
from ltr.admin.io import atomic_write
from ltr.admin.stats import DEFAULT_VISDOM_PORT
from ltr.models.toy1d import Toy1DNet
from ltr.regression_1d.config import Regression1DConfig
from ltr.regression_1d.data import generate, generator
from ltr.regression_1d.evaluate import evaluate_model

CHECKPOINT_VERSION = 1


@dataclass
class SingleState:
    """Everything needed to continue training: model, optimizer, RNG streams, finished epochs, losses."""

    model: Toy1DNet
    optimizer: torch.optim.Optimizer
    shuffle_gen: torch.Generator
    sample_gen: torch.Generator
    epoch: int = 0
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


def init_state(config: Regression1DConfig, device: torch.device) -> SingleState:
    model = Toy1DNet(generator=generator(config.seed, 0, "init")).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    return SingleState(model, opt, generator(config.seed, 0, "shuffle"), generator(config.seed, "single"))


def make_loader(config: Regression1DConfig, shuffle_gen: torch.Generator) -> DataLoader:
    """The training set as a shuffled DataLoader of (x (B, 1), y (B, 1)) batches."""
    x, y = generate(config.dataset, num=config.num_train, data_seed=config.data_seed)
    return DataLoader(TensorDataset(x, y), batch_size=config.batch_size, shuffle=True, generator=shuffle_gen)


def train_epoch(state: SingleState, loader: DataLoader, method, device: torch.device) -> float:
    """One epoch of the straightforward loop; returns the mean training loss."""
    model, opt = state.model, state.optimizer
    total, count = 0.0, 0
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        hx = model.x_features(xb)
        result = method(lambda c, hx=hx: model.score_from_features(hx, c), yb, generator=state.sample_gen)
        opt.zero_grad()
        result.loss.backward()
        opt.step()
        total += float(result.loss.detach()) * xb.shape[0]
        count += xb.shape[0]
    return total / count


def train_single(
    config: Regression1DConfig,
    *,
    device: str | torch.device = "cpu",
    state: SingleState | None = None,
    on_epoch: Callable[[SingleState], None] | None = None,
    progress: bool = False,
    max_epochs: int | None = None,
) -> SingleState:
    """Train (or continue ``state``) until ``config.epochs`` epochs (or ``max_epochs`` more) are done."""
    device = torch.device(device)
    state = state or init_state(config, device)
    loader = make_loader(config, state.shuffle_gen)
    method = config.build_method()
    last = config.epochs if max_epochs is None else min(config.epochs, state.epoch + max_epochs)
    epochs = range(state.epoch, last)
    if progress:
        from tqdm import tqdm

        epochs = tqdm(
            epochs, desc=f"{config.method} d{config.dataset}", initial=state.epoch, total=config.epochs
        )
    for _ in epochs:
        t0 = time.perf_counter()
        loss = train_epoch(state, loader, method, device)
        state.seconds += time.perf_counter() - t0
        state.epoch += 1
        state.losses.append(loss)
        if progress:
            epochs.set_postfix(loss=f"{loss:.3f}")
        if on_epoch is not None:
            on_epoch(state)
    return state


def save_checkpoint(state: SingleState, config: Regression1DConfig, path: Path) -> None:
    """Tensors, plain data and a version only (loadable with ``weights_only=True``); written atomically."""
    payload = {
        "version": CHECKPOINT_VERSION,
        "config": to_dict(config),
        "epoch": state.epoch,
        "losses": state.losses,
        "seconds": state.seconds,
        "model": state.model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "shuffle_gen": state.shuffle_gen.get_state(),
        "sample_gen": state.sample_gen.get_state(),
    }
    buf = io.BytesIO()
    torch.save(payload, buf)
    atomic_write(path, lambda f: f.write(buf.getvalue()))


def load_checkpoint(path: Path, config: Regression1DConfig, device: torch.device) -> SingleState:
    """Rebuild the training state from :func:`save_checkpoint` output; the config must match."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if payload.get("version") != CHECKPOINT_VERSION:
        raise ConfigError(
            f"{path}: checkpoint version {payload.get('version')}, expected {CHECKPOINT_VERSION}"
        )
    saved = from_dict(Regression1DConfig, payload["config"])
    if to_dict(saved.replace(epochs=config.epochs)) != to_dict(config):
        raise ConfigError(
            f"{path}: the checkpoint was trained with a different config; start a new run instead"
        )
    state = init_state(config, device)
    state.model.load_state_dict(payload["model"])
    state.optimizer.load_state_dict(payload["optimizer"])
    state.shuffle_gen.set_state(payload["shuffle_gen"])
    state.sample_gen.set_state(payload["sample_gen"])
    state.epoch, state.losses, state.seconds = payload["epoch"], list(payload["losses"]), payload["seconds"]
    return state


def run_dir(workspace: Path, setting: str, config: Regression1DConfig) -> Path:
    return Path(workspace) / setting / f"dataset{config.dataset}_seed{config.seed}"


def run_single(
    config: Regression1DConfig,
    *,
    setting: str,
    workspace: Path,
    resume: bool = False,
    device: str = "auto",
    visdom: bool = False,
) -> dict:
    """run_training's entry: train, evaluate D_KL, write the run folder; returns the results dict."""
    from ltr.regression_1d.report import save_density_figure

    dev = resolve_device(device)
    if dev.type == "cpu":
        # Intra-op threads only add synchronisation to ops this small (and stall badly on a busy machine).
        torch.set_num_threads(1)
    out = run_dir(workspace, setting, config)
    ckpt = out / "checkpoint.pth"
    if resume and ckpt.is_file():
        state = load_checkpoint(ckpt, config, dev)
        print(f"resuming {ckpt} at epoch {state.epoch}")
    else:
        if (out / "results.json").is_file() and not resume:
            print(f"note: overwriting the finished run in {out}")
        state = None
    save_json(to_dict(config), out / "config.json")
    plot = _visdom_plotter(setting) if visdom else None

    def on_epoch(s: SingleState) -> None:
        save_checkpoint(s, config, ckpt)
        if plot is not None:
            plot(s.epoch, s.losses[-1])

    state = train_single(config, device=dev, state=state, on_epoch=on_epoch, progress=True)
    dkl, log_density = evaluate_model(state.model, config.dataset, config.eval_grid)
    results = {
        "setting": setting,
        "method": config.method,
        "dataset": config.dataset,
        "seed": config.seed,
        "epochs": state.epoch,
        "dkl": dkl,
        "sec_per_epoch": state.seconds / max(1, state.epoch),
        "final_loss": state.losses[-1] if state.losses else None,
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


def _visdom_plotter(setting: str, port: int = DEFAULT_VISDOM_PORT) -> Callable[[int, float], None]:
    """``plot(epoch, loss)``: each epoch's training loss on the visdom server at 127.0.0.1:``port`` (``make
    visdom``), in the env named after ``setting``, through the DiMP trainer's plotter: with no server it
    raises :class:`ltr.admin.stats.VisdomUnavailable`, whose message gives the command that starts one."""
    from ltr.admin.stats import VisdomPlotter

    plotter = VisdomPlotter(env=setting.replace("/", "_"), port=port)

    def plot(epoch: int, loss: float) -> None:
        plotter.plot("loss", "train", epoch, loss)

    return plot
