"""Where things live: dataset roots and the workspace, from environment variables or an optional file.

Resolution order for a key such as ``OTB_DIR``: an explicit argument (CLI ``--root``) > the environment
variable > the JSON file named by ``LTR_PATHS_FILE`` (default ``~/.config/ebmtrack/paths.json``, a flat
``{"OTB_DIR": "/data/otb", ...}`` object). Nothing is generated and nothing is written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ltr.dataset.base import DatasetError

#: Environment variables for every dataset root, by dataset key.
DATASET_VARS: dict[str, str] = {
    "lasot": "LASOT_DIR",
    "got10k": "GOT10K_DIR",
    "trackingnet": "TRACKINGNET_DIR",
    "coco": "COCO_DIR",
    "otb": "OTB_DIR",
    "uav": "UAV123_DIR",
    "nfs": "NFS_DIR",
    "vot": "VOT_DIR",
    "folder": "FOLDER_DIR",
    "synthetic": "SYNTHETIC_DIR",
}


def _paths_file() -> Path:
    return Path(os.environ.get("LTR_PATHS_FILE", Path.home() / ".config" / "ebmtrack" / "paths.json"))


def _from_file(var: str) -> str | None:
    path = _paths_file()
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DatasetError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from err
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object mapping variable names to paths")
    value = data.get(var)
    return str(value) if value else None


def lookup(var: str, explicit: str | os.PathLike | None = None) -> Path | None:
    """The configured path for ``var`` or None when it is not set anywhere."""
    if explicit:
        return Path(explicit)
    value = os.environ.get(var) or _from_file(var)
    return Path(value) if value else None


def dataset_root(dataset: str, explicit: str | os.PathLike | None = None) -> Path:
    """The root directory of ``dataset`` (a key of :data:`DATASET_VARS`); an error names what to set."""
    var = DATASET_VARS[dataset]
    root = lookup(var, explicit)
    if root is None:
        raise DatasetError(
            f"the {dataset} dataset root is not configured: set the environment variable {var} "
            f"(or pass --root, or add {var} to {_paths_file()})"
        )
    if not root.is_dir():
        where = "--root" if explicit is not None else var
        raise DatasetError(f"{where} points to {root}, which is not a directory")
    return root


def workspace_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Where checkpoints, logs and results go: ``LTR_WORKSPACE`` or ``./workspace``."""
    return lookup("LTR_WORKSPACE", explicit) or Path.cwd() / "workspace"
