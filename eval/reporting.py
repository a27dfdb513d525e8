"""Tables (pandas; markdown, CSV, LaTeX) and the JSON report of an evaluation. All numbers in percent."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any

import pandas as pd

from eval.evaluation import POOLED_KEYS, SCORE_KEYS, TrackerEvaluation
from eval.protocols import Protocol
from ltr.admin.io import atomic_write_text

COLUMN_NAMES = {
    "auc": "AUC",
    "op50": "OP50",
    "op75": "OP75",
    "precision": "Precision",
    "norm_precision": "Norm.Prec",
    "ao": "AO",
    "sr50": "SR0.5",
    "sr75": "SR0.75",
}


def score_columns(protocol: Protocol) -> list[str]:
    """Score keys shown in tables for this protocol."""
    if protocol.aggregation == "frame_pooled":
        return [*POOLED_KEYS, "precision", "norm_precision"]
    return list(SCORE_KEYS)


def results_table(evaluations: Seq[TrackerEvaluation], protocol: Protocol) -> pd.DataFrame:
    """One row per tracker ("tracker/param"), one column per score (percent), the number of runs and, when
    time files exist, frames per second."""
    cols = score_columns(protocol)
    with_fps = any("fps" in e.scores for e in evaluations)
    rows = {}
    for e in evaluations:
        rows[e.key] = {COLUMN_NAMES[c]: e.scores[c] for c in cols} | {"Runs": len(e.run_scores)}
        if with_fps:
            rows[e.key]["FPS"] = e.scores.get("fps", float("nan"))
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.index.name = "Tracker"
    return df


def sequence_table(evaluations: Seq[TrackerEvaluation], metric: str = "auc") -> pd.DataFrame:
    """Per-sequence scores: rows = sequences, columns = trackers (percent)."""
    data = {e.key: {s: v[metric] for s, v in e.sequences.items()} for e in evaluations}
    df = pd.DataFrame(data)
    df.index.name = "Sequence"
    return df


def attribute_table(evaluations: Seq[TrackerEvaluation], metric: str = "auc") -> pd.DataFrame:
    """Per-attribute scores: rows = attributes, columns = trackers, plus the number of sequences."""
    data = {e.key: {a: v[metric] for a, v in e.attributes.items()} for e in evaluations}
    df = pd.DataFrame(data)
    if evaluations and evaluations[0].attributes:
        df.insert(
            0, "Sequences", pd.Series({a: v["num_sequences"] for a, v in evaluations[0].attributes.items()})
        )
    df.index.name = "Attribute"
    return df


def _markdown(df: pd.DataFrame, digits: int) -> str:
    """GitHub markdown table (own formatter: pandas' to_markdown needs the optional ``tabulate``)."""

    def cell(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.{digits}f}"
        return str(v)

    header = [df.index.name or "", *map(str, df.columns)]
    body = [[str(idx), *(cell(v) for v in row)] for idx, row in zip(df.index, df.itertuples(index=False))]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    numeric = [False, *(pd.api.types.is_numeric_dtype(df[c]) for c in df.columns)]

    def line(cells: list[str]) -> str:
        padded = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(("-" * (w + 1) + ":") if num else ("-" * (w + 2)) for w, num in zip(widths, numeric))
        + "|"
    )
    return "\n".join([line(header), rule, *(line(r) for r in body)])


def format_table(df: pd.DataFrame, fmt: str = "markdown", digits: int = 2) -> str:
    """Render a table as ``markdown`` (default), ``csv`` or ``latex``."""
    if fmt == "markdown":
        return _markdown(df, digits)
    if fmt == "csv":
        return df.to_csv(float_format=f"%.{digits}f")
    if fmt == "latex":
        return df.to_latex(float_format=f"%.{digits}f".__mod__)
    raise ValueError(f"unknown table format {fmt!r}; choose markdown, csv or latex")


def _clean(v: float) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def report_dict(evaluations: Seq[TrackerEvaluation], protocol: Protocol, **meta: Any) -> dict[str, Any]:
    """The JSON report: ``{"<tracker>/<param>": {"auc", "op50", "op75", "precision", "norm_precision",
    "sequences": {"<seq>": {"auc", "precision", "norm_precision"}}, "runs", "curves", "protocol", ...}}``;
    every score in percent. ``meta`` items are added to every tracker's entry."""
    out: dict[str, Any] = {}
    for e in evaluations:
        entry: dict[str, Any] = {k: _clean(v) for k, v in e.scores.items()}
        entry["num_runs"] = len(e.run_scores)
        entry["runs"] = [{k: _clean(v) for k, v in r.items()} for r in e.run_scores]
        entry["sequences"] = {s: {k: _clean(v) for k, v in d.items()} for s, d in e.sequences.items()}
        if e.attributes:
            entry["attributes"] = {a: {k: _clean(v) for k, v in d.items()} for a, d in e.attributes.items()}
        entry["curves"] = {
            "success": {
                "thresholds": e.thresholds.overlap.tolist(),
                "values": (100 * e.curves["success"]).tolist(),
            },
            "precision": {
                "thresholds": e.thresholds.center.tolist(),
                "values": (100 * e.curves["precision"]).tolist(),
            },
            "norm_precision": {
                "thresholds": e.thresholds.norm_center.tolist(),
                "values": (100 * e.curves["norm_precision"]).tolist(),
            },
        }
        entry["protocol"] = protocol.name
        entry.update(meta)
        out[e.key] = entry
    return out


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    """Write the report atomically (indent 2, NaN written as null)."""
    return atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")
