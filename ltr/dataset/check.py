"""Check a dataset on disk: ``python -m ltr.dataset.check <dataset> [--root DIR] [--split S] [--json FILE]``.

For every sequence it reports the frame count, the number of valid and visible frames and the first box, and
collects problems: unreadable, empty or malformed annotation files (with file and line), missing frame
files, frame count vs annotation row mismatches, empty sequences and sequences whose first frame has no valid
box. ``--decode`` (the slow, thorough mode, with a progress bar over all frames) also decodes every frame and
reports unreadable and truncated images and frames whose size differs from the sequence's first frame (the
tracker refuses such a sequence).
Exit status: 0 when nothing is wrong, 1 when problems were found, 2 when the dataset cannot be opened.
JSON output: ``{"dataset": ..., "sequences": {"<name>": {"frames": n, "valid": n, "visible": n,
"first_box": [x, y, w, h]}}, "problems": ["..."]}`` (NaN boxes as null).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ltr.admin.io import atomic_write_text
from ltr.dataset.base import DatasetError, Sequence, SequenceDataset, read_image_checked
from ltr.dataset.registry import DATASETS, get_dataset


def _parse_value(text: str) -> Any:
    if "," in text:
        return [_parse_value(part) for part in text.split(",") if part]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_options(items: list[str]) -> dict[str, Any]:
    """``["layout=raw", "chunks=0,1"]`` -> ``{"layout": "raw", "chunks": [0, 1]}``."""
    options = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--option expects key=value, got {item!r}")
        options[key] = _parse_value(value)
    return options


def _box_json(box: Any) -> list[float | None]:
    return [None if not math.isfinite(float(v)) else float(v) for v in box]


def check_sequence(
    seq: Sequence, decode: bool = False, advance: Callable[[int], object] | None = None
) -> tuple[dict[str, Any], list[str]]:
    """Summary dict and problems of one loaded sequence (frame files are checked for existence; with
    ``decode`` every frame is decoded, see :func:`decode_frames`, and ``advance(1)`` is called per frame)."""
    problems = [f"{seq.name}: {p}" for p in seq.attributes.get("problems", [])]
    n = len(seq)
    info = {
        "frames": n,
        "valid": int(seq.valid[:n].sum()),
        "visible": int(seq.visible[:n].sum()),
        "first_box": _box_json(seq.boxes[0]) if len(seq.boxes) else None,
    }
    if n == 0:
        problems.append(f"{seq.name}: empty sequence (no frames)")
        return info, problems
    if len(seq.boxes) != n:
        problems.append(f"{seq.name}: {len(seq.boxes)} annotation rows but {n} frames")
    if not seq.valid[0]:
        problems.append(f"{seq.name}: the first frame has no valid box ({info['first_box']})")
    if seq.frame_paths is not None:
        missing = [p for p in seq.frame_paths if not p.is_file()]
        if missing:
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            problems.append(f"{seq.name}: missing frame {missing[0]}{more}")
            return info, problems
    if decode:
        problems.extend(decode_frames(seq, advance))
    return info, problems


def decode_frames(seq: Sequence, advance: Callable[[int], object] | None = None) -> list[str]:
    """Decode every frame of ``seq``; problems: each unreadable or truncated image (by file), and one line
    for the frames whose (width, height) differs from the first frame's (how many, and the first of them).

    ``advance(1)`` is called after each frame (a progress bar's ``update``).
    """
    import cv2

    problems: list[str] = []
    first: tuple[tuple[int, int], str] | None = None
    other_size: list[tuple[str, tuple[int, int]]] = []
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)  # the problems are reported here
    try:
        for i in range(len(seq)):
            where = str(seq.frame_paths[i]) if seq.frame_paths is not None else f"frame {i}"
            try:
                img = read_image_checked(seq.frame_paths[i]) if seq.frame_paths is not None else seq.frame(i)
            except DatasetError as err:
                problems.append(f"{seq.name}: {err}")
                continue
            finally:
                if advance is not None:
                    advance(1)
            size = (int(img.shape[1]), int(img.shape[0]))
            if first is None:
                first = (size, where)
            elif size != first[0]:
                other_size.append((where, size))
    finally:
        cv2.utils.logging.setLogLevel(level)
    if other_size and first is not None:
        (w0, h0), where0 = first
        where, (w, h) = other_size[0]
        problems.append(
            f"{seq.name}: {len(other_size)} frame(s) differ in size from the first frame {where0} ({w0}x{h0}), "
            f"the first of them {where} ({w}x{h}); the tracker refuses such a sequence"
        )
    return problems


def _load(dataset: SequenceDataset, name: str) -> Sequence:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # readers also record these as problems
        return dataset.get_sequence(name)


def check_dataset(
    dataset: SequenceDataset,
    *,
    sequences: list[str] | None = None,
    decode: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Check every (or the named) sequence; returns the JSON-ready report.

    With ``decode``, a second pass decodes every frame of the sequences whose frame files all exist, with a
    progress bar over all of their frames.
    """
    names = sequences or dataset.sequence_names()
    report: dict[str, Any] = {"dataset": dataset.name, "sequences": {}, "problems": []}
    complete: list[str] = []  # sequences whose frames can all be decoded
    for name in tqdm(
        names, desc=f"checking {dataset.name}", unit="seq", disable=not progress, file=sys.stderr
    ):
        try:
            seq = _load(dataset, name)
        except (DatasetError, KeyError) as err:
            report["problems"].append(f"{name}: {err}")
            continue
        info, problems = check_sequence(seq)
        report["sequences"][name] = info
        report["problems"].extend(problems)
        if info["frames"] and not any(p.startswith(f"{name}: missing frame") for p in problems):
            complete.append(name)
    if decode:
        total = sum(report["sequences"][n]["frames"] for n in complete)
        with tqdm(
            total=total, desc=f"decoding {dataset.name}", unit="frame", disable=not progress, file=sys.stderr
        ) as bar:
            # each sequence is loaded again: cheap next to decoding, and no frame lists are kept in memory
            for name in complete:
                report["problems"].extend(decode_frames(_load(dataset, name), bar.update))
    return report


def _summary_line(name: str, info: dict[str, Any]) -> str:
    box = info["first_box"]
    box_text = "none" if box is None else "[" + ", ".join("nan" if v is None else f"{v:g}" for v in box) + "]"
    counts = f"frames={info['frames']} valid={info['valid']} visible={info['visible']}"
    return f"{name}: {counts} first_box={box_text}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ltr.dataset.check", description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=DATASETS.names, help="dataset name")
    parser.add_argument("--root", help="dataset root (default: the dataset's environment variable)")
    parser.add_argument("--split", help="split name (dataset specific)")
    parser.add_argument("--json", type=Path, help="write the report as JSON to this file")
    parser.add_argument("--sequence", action="append", help="check only this sequence (repeatable)")
    parser.add_argument("--option", "-o", action="append", default=[], help="reader option key=value")
    parser.add_argument(
        "--decode",
        action="store_true",
        help="also decode every frame (slow): unreadable or truncated images, frames of another size",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="print only problems and the summary")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)

    try:
        dataset = get_dataset(args.dataset, root=args.root, split=args.split, **parse_options(args.option))
        report = check_dataset(
            dataset, sequences=args.sequence, decode=args.decode, progress=not args.no_progress
        )
    except (DatasetError, TypeError) as err:  # unset/missing root, bad split file, unknown reader option
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        for name, info in report["sequences"].items():
            print(_summary_line(name, info))
    for problem in report["problems"]:
        print(f"PROBLEM {problem}")
    frames = sum(info["frames"] for info in report["sequences"].values())
    print(
        f"{report['dataset']}: {len(report['sequences'])} sequences, {frames} frames, "
        f"{len(report['problems'])} problems"
    )
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=1) + "\n")
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
