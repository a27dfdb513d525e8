"""User-provided split files (sub-lists of a dataset's sequences), found by option, variable or file.

A split that cannot be derived from facts shipped with this package (e.g. GOT-10k ``vottrain``/``votval``,
LaSOT ``train_train``) is read from a text file with one entry per line: a sequence name, or a 0-based
integer index into the dataset's official list (pytracking's split-file convention). The file is found, in
order, from an explicit ``split_file=`` option, the variable ``<DATASET>_<SPLIT>_SPLIT`` (environment or the
paths file of :mod:`ltr.admin.paths`), or ``ltr/data_specs/<dataset>_<split>_split.txt``.
"""

from __future__ import annotations

import os
from pathlib import Path

from ltr.admin.paths import lookup
from ltr.dataset.base import DatasetError
from ltr.dataset.textio import read_lines

DATA_SPECS = Path(__file__).resolve().parent.parent / "data_specs"


def split_variable(dataset: str, split: str) -> str:
    """``got10k``, ``vottrain`` -> ``GOT10K_VOTTRAIN_SPLIT``."""
    return f"{dataset}_{split}_split".upper().replace("-", "_")


def find_split_file(dataset: str, split: str, explicit: str | os.PathLike | None = None) -> Path:
    """The split file for ``dataset``/``split``; an error names the option and variable to set."""
    var = split_variable(dataset, split)
    path = lookup(var, explicit)
    if path is None:
        shipped = DATA_SPECS / f"{dataset}_{split}_split.txt"
        if shipped.is_file():
            return shipped
        raise DatasetError(
            f"the {dataset} split {split!r} needs a split file (one name or 0-based index per line): "
            f"pass split_file=PATH or set {var}"
        )
    if not path.is_file():
        raise DatasetError(f"split file for {dataset}/{split} not found: {path} (from {var} or split_file)")
    return path


def read_split_file(path: Path, official: list[str] | None = None) -> list[str]:
    """Sequence names listed in ``path``; integer lines index ``official`` (0-based), in file order."""
    names: list[str] = []
    for lineno, line in enumerate(read_lines(path), start=1):
        entry = line.strip()
        if not entry:
            continue
        if entry.isdigit():
            if official is None:
                raise DatasetError(
                    f"{path}:{lineno}: an index ({entry}) but this dataset has no official list"
                )
            index = int(entry)
            if index >= len(official):
                raise DatasetError(f"{path}:{lineno}: index {index} out of range ({len(official)} sequences)")
            names.append(official[index])
        else:
            names.append(entry)
    if not names:
        raise DatasetError(f"{path}: the split file lists no sequences")
    return names
