"""Training statistics: per-epoch records written as CSV + JSON, and a small client for a local visdom server.

A *record* is a flat dict of plain values for one epoch and phase, e.g.
``{"epoch": 3, "phase": "train", "loss": 0.41, "lr/bb_regressor": 0.001, "samples_per_s": 812.0}``.
The history (a list of records) is the single source: :func:`write_stats` rewrites both files from it
atomically, so a killed run never leaves a half-written line and a resumed run (whose history comes from the
checkpoint) drops the records of the epoch it lost.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import logging
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ltr.admin.extras import MissingExtra, import_extra
from ltr.admin.io import atomic_write_text

STATS_CSV = "stats.csv"
STATS_JSON = "stats.json"
#: Leading CSV columns; the rest follow in sorted order.
LEADING_COLUMNS = ("epoch", "phase")

DEFAULT_VISDOM_SERVER = "http://127.0.0.1"
DEFAULT_VISDOM_PORT = 8097


def csv_columns(history: Sequence[Mapping[str, Any]]) -> list[str]:
    """``epoch, phase`` then every other key that occurs in ``history``, sorted."""
    keys: set[str] = set()
    for record in history:
        keys.update(record)
    return [c for c in LEADING_COLUMNS if c in keys] + sorted(keys - set(LEADING_COLUMNS))


def stats_csv_text(history: Sequence[Mapping[str, Any]]) -> str:
    """The CSV text of ``history``: a header row, one row per record, empty cells for missing keys."""
    buf = io.StringIO()
    columns = csv_columns(history)
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    for record in history:
        writer.writerow({k: _csv_value(v) for k, v in record.items()})
    return buf.getvalue()


def _csv_value(value: Any) -> Any:
    if isinstance(value, float):
        return repr(value)  # shortest round-trip form
    return value


def write_stats(
    directory: str | Path, history: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None
) -> tuple[Path, Path]:
    """Atomically (re)write ``<directory>/stats.csv`` and ``<directory>/stats.json`` from ``history``.

    The JSON file is ``{"meta": {...}, "history": [...]}``; non-finite floats are written as null so that it
    stays standard JSON.
    """
    directory = Path(directory)
    csv_path = atomic_write_text(directory / STATS_CSV, stats_csv_text(history))
    payload = {"meta": dict(meta or {}), "history": [_json_safe(dict(r)) for r in history]}
    json_path = atomic_write_text(
        directory / STATS_JSON, json.dumps(payload, indent=1, allow_nan=False) + "\n"
    )
    return csv_path, json_path


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def read_stats_json(directory: str | Path) -> dict[str, Any]:
    """The parsed ``stats.json`` of a run folder."""
    path = Path(directory) / STATS_JSON
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from err


class VisdomUnavailable(RuntimeError):
    """No visdom server answered at the configured address."""


@contextlib.contextmanager
def _quiet_logger(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    old = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(old)


def visdom_start_hint(port: int) -> str:
    return (
        f"start one in another terminal with `python -m ltr.admin.visdom_server --port {port}` (works offline, "
        "listens on 127.0.0.1 only), or train without --visdom"
    )


class VisdomPlotter:
    """Line plots of scalar curves on a visdom server; every failure raises (``raise_exceptions=True``).

    One window per curve name (``win`` = the name), one trace per phase (``train``/``val``). Construction
    checks the connection and raises :class:`VisdomUnavailable` with start instructions if nothing answers.
    """

    def __init__(
        self, *, env: str, server: str = DEFAULT_VISDOM_SERVER, port: int = DEFAULT_VISDOM_PORT
    ) -> None:
        try:  # imported here: only runs that ask for visdom need it (the ``visdom`` extra)
            visdom = import_extra("visdom", "visdom")
        except MissingExtra as err:
            raise VisdomUnavailable(f"--visdom: {err}") from None
        self.env = env
        self.address = f"{server}:{port}"
        try:
            with _quiet_logger("visdom"), warnings.catch_warnings():
                warnings.filterwarnings("ignore", category=DeprecationWarning, module="visdom")
                self.vis = visdom.Visdom(
                    server=server, port=port, env=env, raise_exceptions=True, use_incoming_socket=False
                )
        except ConnectionError as err:
            raise VisdomUnavailable(
                f"--visdom: no visdom server is running at {self.address}; {visdom_start_hint(port)}"
            ) from err
        if not self.vis.check_connection():
            raise VisdomUnavailable(
                f"--visdom: the visdom server at {self.address} does not answer; {visdom_start_hint(port)}"
            )

    @staticmethod
    def window_id(name: str) -> str:
        """The visdom window id used for curve ``name``."""
        return "curve_" + "".join(c if c.isalnum() or c in "-_" else "_" for c in name)

    def plot(self, name: str, trace: str, x: float, y: float) -> None:
        """Append point ``(x, y)`` to trace ``trace`` of the curve window ``name`` (created on first use)."""
        win = self.window_id(name)
        exists = self.vis.win_exists(win, env=self.env)
        if exists is None:
            raise VisdomUnavailable(f"lost the connection to the visdom server at {self.address}")
        self.vis.line(
            X=[float(x)],
            Y=[float(y)],
            win=win,
            env=self.env,
            name=trace,
            update="append" if exists else None,
            opts={"title": name, "xlabel": "epoch", "showlegend": True},
        )

    def text(self, name: str, text: str) -> None:
        """Show ``text`` in window ``name`` (replaced on each call)."""
        self.vis.text(text, win=self.window_id(name), env=self.env)
