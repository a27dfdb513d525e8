"""Safe training checkpoints: plain data + tensors, written atomically, loaded with ``weights_only=True``.

Format (version 1), a dict holding nothing but str/int/float/bool/None, lists, dicts and tensors::

    {"format": "ebmtrack-checkpoint", "version": 1, "setting": "dimp/nce_plus", "epoch": 7,
     "config": {...plain resolved config...}, "net": net.state_dict(),
     "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "scaler": {...} or absent,
     "stats": {"history": [{"epoch": 1, "phase": "train", ...}, ...]},
     "rng": {"world_size": 1, "ranks": [{"torch": uint8 tensor, "numpy_keys": ..., ...}]},
     "num_parameters": int, "num_trainable": int}

Layout: ``<workspace>/checkpoints/<module>/<setting>/ep0007.pth.tar`` plus ``config.json`` (the resolved
config) and the stats files, all in one run folder (:func:`run_dir`). The network is rebuilt from the config;
nothing in a checkpoint is a pickled Python object, so :func:`load_checkpoint` refuses any file that would
need one.

``python -m ltr.admin.checkpoint PATH`` prints a checkpoint's format version, setting, epoch and parameter
count; it exits with status 2 and a message naming the file and the reason for anything else.
"""

from __future__ import annotations

import argparse
import pickle
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ltr.admin.io import atomic_write

FORMAT = "ebmtrack-checkpoint"
VERSION = 1
REQUIRED_KEYS = ("format", "version", "setting", "epoch", "config", "net")
_NAME_RE = re.compile(r"^ep(\d{4,})\.pth\.tar$")


class CheckpointError(ValueError):
    """A file that is not a safe checkpoint of this project; the message names the file and the reason."""


def run_dir(workspace: str | Path, setting: str) -> Path:
    """The run folder of ``setting`` (``"<module>/<name>"``): ``<workspace>/checkpoints/<module>/<name>``."""
    parts = setting.split("/")
    if len(parts) != 2 or not all(parts) or any(p in (".", "..") for p in parts):
        raise ValueError(f"setting {setting!r} must look like '<module>/<name>' (e.g. 'dimp/nce_plus')")
    return Path(workspace) / "checkpoints" / parts[0] / parts[1]


def checkpoint_path(directory: str | Path, epoch: int) -> Path:
    """``<directory>/ep0007.pth.tar`` for ``epoch`` 7."""
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    return Path(directory) / f"ep{epoch:04d}.pth.tar"


def list_checkpoints(directory: str | Path) -> list[tuple[int, Path]]:
    """``(epoch, path)`` of every ``epNNNN.pth.tar`` in ``directory``, sorted by epoch; temp files ignored."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        m = _NAME_RE.match(path.name)
        if m and path.is_file():
            found.append((int(m.group(1)), path))
    return sorted(found)


def latest_checkpoint(directory: str | Path) -> Path | None:
    """The checkpoint with the highest epoch in ``directory`` or None (writes are atomic: it is complete)."""
    found = list_checkpoints(directory)
    return found[-1][1] if found else None


def remove_stale_temp_files(directory: str | Path) -> list[Path]:
    """Delete temp files a killed writer left behind (``.epNNNN.pth.tar.*.tmp`` and the like)."""
    directory = Path(directory)
    removed = []
    if directory.is_dir():
        for path in directory.glob(".*.tmp"):
            path.unlink()
            removed.append(path)
    return removed


def _check_plain(value: Any, where: str) -> None:
    """Raise TypeError unless ``value`` is made of plain data and tensors only."""
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"{where}: key {k!r} of type {type(k).__name__} is not str/int")
            _check_plain(v, f"{where}[{k!r}]")
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
        return
    raise TypeError(f"{where}: {type(value).__module__}.{type(value).__name__} is not plain data or a tensor")


def save_checkpoint(path: str | Path, checkpoint: Mapping[str, Any]) -> Path:
    """Write ``checkpoint`` atomically (temp file in the same folder, fsync, rename).

    ``checkpoint`` must hold the :data:`REQUIRED_KEYS` with ``format``/``version`` set to :data:`FORMAT` /
    :data:`VERSION`, and nothing but plain data and tensors (checked before anything is written).
    """
    missing = [k for k in REQUIRED_KEYS if k not in checkpoint]
    if missing:
        raise ValueError(f"checkpoint for {path} lacks required key(s) {missing}")
    if checkpoint["format"] != FORMAT or checkpoint["version"] != VERSION:
        raise ValueError(f"checkpoint for {path}: format/version must be {FORMAT!r}/{VERSION}")
    _check_plain(dict(checkpoint), "checkpoint")
    data = dict(checkpoint)
    return atomic_write(path, lambda f: torch.save(data, f))


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load and validate a checkpoint with ``torch.load(..., weights_only=True)``.

    Raises :class:`CheckpointError` naming ``path`` and the reason for a missing file, a file that is not a
    PyTorch archive, one holding pickled Python objects (refused, never unpickled), or a foreign/unknown
    format tag or version.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(f"{path}: {_unpickling_reason(str(err))}") from err
    except Exception as err:  # any parse failure of a foreign/corrupt file: re-raised with the file named
        raise CheckpointError(f"{path}: not a readable PyTorch checkpoint file ({_first_line(err)})") from err
    return validate(data, path)


def _unpickling_reason(text: str) -> str:
    """Why torch's weights-only unpickler stopped, in words (its message is long and generic)."""
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    what = detail.group(1).strip() if detail else text.splitlines()[0].strip()
    if "Unsupported operand" in what:  # a byte that is no pickle opcode: not a torch file at all
        return f"not a PyTorch checkpoint file (no pickle stream: {what})"
    glob = re.search(r"GLOBAL (\S+)", what)
    if glob:
        what = f"it needs {glob.group(1)}"
    return (
        "refused: the file holds pickled Python objects, which are never loaded "
        f"(safe loading with weights_only=True failed: {what})"
    )


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def validate(data: Any, path: str | Path) -> dict[str, Any]:
    """Check the format tag, version and required keys of loaded checkpoint ``data`` (from ``path``)."""
    if not isinstance(data, dict):
        raise CheckpointError(
            f"{path}: not an {FORMAT} file (top level is a {type(data).__name__}, not a dict)"
        )
    tag = data.get("format")
    if tag != FORMAT:
        found = "no 'format' key" if tag is None else f"format tag {tag!r}"
        raise CheckpointError(f"{path}: not an {FORMAT} file ({found}; expected format {FORMAT!r})")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"{path}: format version {version!r} is not an integer")
    if version > VERSION:
        raise CheckpointError(
            f"{path}: format version {version} is newer than this code reads ({VERSION}); update ebmtrack"
        )
    if version < 1:
        raise CheckpointError(f"{path}: unknown format version {version}")
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise CheckpointError(f"{path}: incomplete checkpoint, missing key(s) {missing}")
    net = data["net"]
    if not isinstance(net, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in net.items()
    ):
        raise CheckpointError(f"{path}: 'net' is not a state dict (str -> tensor)")
    if not isinstance(data["epoch"], int) or not isinstance(data["setting"], str):
        raise CheckpointError(f"{path}: 'epoch' must be an int and 'setting' a str")
    if not isinstance(data["config"], dict):
        raise CheckpointError(f"{path}: 'config' must be a dict of plain data")
    return data


def parameter_count(checkpoint: Mapping[str, Any]) -> int:
    """Number of network parameters: the stored count, else the elements of floating tensors in ``net``."""
    stored = checkpoint.get("num_parameters")
    if isinstance(stored, int):
        return stored
    return sum(t.numel() for t in checkpoint["net"].values() if t.is_floating_point())


def describe(checkpoint: Mapping[str, Any], path: str | Path) -> str:
    """A few human-readable lines about a loaded checkpoint."""
    lines = [
        f"file:       {path}",
        f"format:     {checkpoint['format']} version {checkpoint['version']}",
        f"setting:    {checkpoint['setting']}",
        f"epoch:      {checkpoint['epoch']}",
        f"parameters: {parameter_count(checkpoint):,}",
    ]
    trainable = checkpoint.get("num_trainable")
    if isinstance(trainable, int):
        lines.append(f"trainable:  {trainable:,}")
    lines.append(f"tensors:    {len(checkpoint['net'])} in the state dict")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ltr.admin.checkpoint",
        description="Inspect an ebmtrack checkpoint (safe loading only; pickled objects are refused).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="checkpoint file(s)")
    args = parser.parse_args(argv)
    status = 0
    for i, path in enumerate(args.paths):
        try:
            data = load_checkpoint(path)
        except CheckpointError as err:
            print(f"error: {err}", file=sys.stderr)
            status = 2
            continue
        if i:
            print()
        print(describe(data, path))
    return status


if __name__ == "__main__":
    sys.exit(main())
