"""Export a tracker's networks to ONNX models for the ONNX Runtime backend.

``python -m pytracking.export_onnx dimp <param> [key=value ...] [--net CKPT] --out DIR [--int8
[--calibrate-on DATASET] [--calibration-frames N]]``

Writes ``DIR/<model>.onnx`` and ``DIR/manifest.json`` (:mod:`pytracking.onnx.export`) for the checkpoint's
crop geometry and the parameter set's number of refinement boxes (``key=value`` overrides as in
``run_tracker.py``; ``--net`` defaults to the latest checkpoint of the parameter set's train setting). Track
with them: ``python pytracking/run_tracker.py dimp <param> backend=onnxruntime onnx_dir=DIR --name NAME
--device cpu ...``. ``--int8`` quantises the convolutional models statically (:mod:`pytracking.onnx.quantize`)
with activation ranges calibrated on the first frames of dataset ``--calibrate-on`` (``name[:split]``;
default the synthetic videos' val split, so that the test split stays unseen) tracked by the float32 models, and
the box score's linear layers dynamically. Errors are one ``error:`` line, exit status 2.
"""

from __future__ import annotations

import argparse
import sys

from ltr.admin.checkpoint import CheckpointError
from ltr.admin.config import apply_overrides
from ltr.admin.extras import MissingExtra, import_extra
from ltr.dataset.base import DatasetError
from ltr.dataset.registry import BENCHMARKS, parse_dataset_spec
from pytracking.evaluation.tracker_spec import TrackerSpec, network_path
from pytracking.parameter.dimp import PARAMETERS, get_parameters
from pytracking.tracker.dimp.network import NoCheckpointError, load_network


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pytracking.export_onnx", description=__doc__.split("\n")[0])
    p.add_argument("tracker", choices=["dimp"])
    p.add_argument("param", help=f"parameter set: {', '.join(PARAMETERS.names)}")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="changes of parameter-set fields")
    p.add_argument("--net", default=None, help="checkpoint (default: latest of the param's train setting)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--int8",
        action="store_true",
        help="quantise the convolutions and the box score's linear layers to int8",
    )
    p.add_argument(
        "--calibrate-on",
        default="synthetic:val",
        help="dataset[:split] of the int8 calibration frames (default synthetic:val, not the test split)",
    )
    p.add_argument(
        "--root", default=None, help="calibration dataset root (default: its environment variable)"
    )
    p.add_argument("--calibration-frames", type=int, default=64, help="frames to calibrate int8 on")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_intermixed_args(argv)
    try:
        import_extra("onnx", "onnx")
        import_extra("onnxscript", "onnx")
        if args.int8:
            import_extra("onnxruntime", "onnx")
        get_parameters(args.param)  # an unknown set: one line listing the choices
        params = apply_overrides(get_parameters(args.param), args.overrides)
        path = network_path(TrackerSpec("dimp", args.param, args.net, device="cpu"))
        loaded = load_network(path, "cpu")
        if args.calibration_frames < 1:
            raise ValueError(f"--calibration-frames must be >= 1, got {args.calibration_frames}")
        if args.int8:  # the dataset is there before any export
            name, split = parse_dataset_spec(args.calibrate_on)
            BENCHMARKS[name].open(args.root, split).sequence_names()
    except (MissingExtra, NoCheckpointError, CheckpointError, DatasetError, ValueError, KeyError) as err:
        print(f"error: {err.args[0] if isinstance(err, KeyError) else err}", file=sys.stderr)
        return 2

    from pytracking.onnx.export import export_dimp

    manifest = export_dimp(
        loaded,
        params,
        args.out,
        param_name=args.param,
        checkpoint=path,
        progress=lambda name: print(f"exporting {name}", file=sys.stderr),
    )
    if args.int8:
        from pytracking.onnx.quantize import quantize_export

        manifest = quantize_export(
            args.out,
            loaded,
            params,
            dataset=args.calibrate_on,
            root=args.root,
            num_frames=args.calibration_frames,
        )
    print(f"{args.out}: {len(manifest.models)} models ({manifest.precision}), manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
