"""Success / precision / normalised-precision plots (matplotlib, Agg backend) as PNG and PDF.

The legend is ordered by score, best first, with the score in brackets, as in the OTB/LaSOT toolkits.
"""

from __future__ import annotations

import io
from collections.abc import Sequence as Seq
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from eval.evaluation import TrackerEvaluation  # noqa: E402
from eval.protocols import Protocol  # noqa: E402
from ltr.admin.io import atomic_write  # noqa: E402

PLOTS = {
    # name: (curve key, thresholds attribute, score key, x label, title)
    "success": ("success", "overlap", "auc", "Overlap threshold", "Success plot"),
    "precision": ("precision", "center", "precision", "Location error threshold [pixels]", "Precision plot"),
    "norm_precision": (
        "norm_precision",
        "norm_center",
        "norm_precision",
        "Normalized location error threshold",
        "Normalized precision plot",
    ),
}


def plot_curves(
    evaluations: Seq[TrackerEvaluation], protocol: Protocol, out_dir: str | Path, *, title: str = ""
) -> list[Path]:
    """Write ``{success,precision,norm_precision}_plot.{png,pdf}`` into ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    score_label = {"auc": "AO" if protocol.aggregation == "frame_pooled" else "AUC"}
    for name, (curve_key, thr_attr, score_key, xlabel, plot_title) in PLOTS.items():
        ranked = sorted(evaluations, key=lambda e: e.scores[score_key], reverse=True)
        fig, ax = plt.subplots(figsize=(6.5, 5.0))
        for i, e in enumerate(ranked):
            x = getattr(e.thresholds, thr_attr)
            y = 100.0 * e.curves[curve_key]
            ax.plot(
                x,
                y,
                linewidth=2,
                linestyle="-" if i < 10 else "--",
                label=f"{e.key} [{e.scores[score_key]:.1f}]",
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Rate [%]")
        ax.set_ylim(0, 100)
        ax.set_xlim(float(x[0]), float(x[-1]))
        ax.grid(True, linestyle=":")
        label = score_label.get(score_key, score_key.replace("_", " "))
        ax.set_title(f"{plot_title}{' - ' + title if title else ''} ({label})")
        ax.legend(loc="lower left" if name == "success" else "lower right", fontsize=8)
        fig.tight_layout()
        for ext in ("png", "pdf"):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=150)
            written.append(
                atomic_write(out_dir / f"{name}_plot.{ext}", lambda f, b=buf: f.write(b.getvalue()))
            )
        plt.close(fig)
    return written
