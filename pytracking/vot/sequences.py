"""Write sequences of any dataset of this toolkit in the VOT toolkit's sequence layout.

``python -m pytracking.vot.sequences OUT [--dataset synthetic] [--root DIR] [--sequence NAME ...]
[--frames N] [--anchor-every K]`` writes ``OUT/list.txt`` and per sequence ``OUT/<name>/sequence``
(``channels.color=color/%08d.jpg``), ``color/00000001.jpg ...`` (JPEG, quality 95), ``groundtruth.txt``:
one ``x,y,w,h`` rectangle per frame (image pixels, 0-based), or ``0`` (VOT's "unknown") where the dataset
has no valid box, and ``anchor.value``: 1 on every K-th frame with a valid box, from the first (the forward
anchors where the VOT2020+ ``multistart`` experiments start the tracker), 0 elsewhere. Pointing a VOT workspace's ``sequences`` at ``OUT`` runs a stack's experiments on them
offline, e.g. the embedded synthetic videos. Files are written atomically.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path

import cv2
import numpy as np

from ltr.admin.io import atomic_write, atomic_write_text
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset

JPEG_QUALITY = 95


def groundtruth_lines(boxes: np.ndarray, valid: np.ndarray) -> str:
    """``groundtruth.txt`` text: ``x,y,w,h`` per valid frame, ``0`` (unknown) otherwise."""
    return "".join(
        (",".join(f"{v:.4f}" for v in box) if ok else "0") + "\n"
        for box, ok in zip(boxes, valid, strict=True)
    )


def anchor_lines(valid: np.ndarray, every: int) -> str:
    """``anchor.value`` text: 1 on frames 0, K, 2K, ... whose box is valid, 0 elsewhere."""
    return "".join(f"{int(ok and t % every == 0)}\n" for t, ok in enumerate(valid))


def write_sequence(
    sequence: Sequence, folder: Path, max_frames: int | None = None, anchor_every: int = 50
) -> int:
    """Write one sequence (its first ``max_frames`` frames) to ``folder``; returns the number of frames."""
    count = len(sequence) if max_frames is None else min(len(sequence), max_frames)
    for index in range(count):
        ok, data = cv2.imencode(
            ".jpg",
            cv2.cvtColor(sequence.frame(index), cv2.COLOR_RGB2BGR),
            [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY],
        )
        if not ok:
            raise DatasetError(f"{sequence.name}: frame {index} cannot be encoded as JPEG")
        atomic_write(folder / "color" / f"{index + 1:08d}.jpg", lambda f, data=data: f.write(data.tobytes()))
    atomic_write_text(folder / "sequence", "channels.color=color/%08d.jpg\nformat=default\nfps=30\n")
    valid = sequence.valid[:count]
    atomic_write_text(folder / "groundtruth.txt", groundtruth_lines(sequence.boxes[:count], valid))
    atomic_write_text(folder / "anchor.value", anchor_lines(valid, anchor_every))
    return count


def write_vot_sequences(
    dataset: SequenceDataset,
    out: Path,
    names: Iterable[str] | None = None,
    max_frames: int | None = None,
    anchor_every: int = 50,
) -> list[str]:
    """Write the sequences ``names`` (default: all) of ``dataset`` under ``out``; returns their names."""
    names = list(names) if names is not None else dataset.sequence_names()
    unknown = sorted(set(names) - set(dataset.sequence_names()))
    if unknown:
        raise DatasetError(f"the dataset has no sequence(s) {unknown}")
    for name in names:
        write_sequence(dataset.get_sequence(name), out / name, max_frames, anchor_every)
    atomic_write_text(out / "list.txt", "".join(f"{n}\n" for n in names))
    return names


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytracking.vot.sequences", description=__doc__.split("\n")[0])
    p.add_argument("out", help="output folder (a VOT workspace's sequences/ folder)")
    p.add_argument(
        "--dataset", default="synthetic", help="dataset name (ltr.dataset.registry), default synthetic"
    )
    p.add_argument("--root", default=None, help="dataset root (default: the dataset's environment variable)")
    p.add_argument("--split", default=None, help="dataset split")
    p.add_argument("--sequence", nargs="+", default=None, metavar="NAME", help="only these sequences")
    p.add_argument("--frames", type=int, default=None, help="at most this many frames per sequence")
    p.add_argument("--anchor-every", type=int, default=50, help="frames between multistart anchors")
    return p


def main(argv: list[str] | None = None) -> int:
    from ltr.dataset.registry import get_dataset

    args = build_parser().parse_args(argv)
    try:
        if args.frames is not None and args.frames < 2:
            raise ValueError(f"--frames must be >= 2, got {args.frames}")
        if args.anchor_every < 1:
            raise ValueError(f"--anchor-every must be >= 1, got {args.anchor_every}")
        dataset = get_dataset(args.dataset, root=args.root, split=args.split)
        names = write_vot_sequences(dataset, Path(args.out), args.sequence, args.frames, args.anchor_every)
    except (KeyError, ValueError, DatasetError, OSError) as err:
        print(f"error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2
    print(f"{args.out}: {len(names)} sequences in the VOT layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
